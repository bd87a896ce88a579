package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestSecureMetricsFollowTheResource runs the operator with its metrics
// endpoint as main.go serves it (HTTPS, authentication and authorization by
// the API server) and scrapes it the way Prometheus does, with a
// ServiceAccount token: no token is refused (401), a token without the
// metrics-reader role of config/rbac is forbidden (403), and with the role
// the scrape shows the resource's state and release follow an install, an
// upgrade the API server denies, its recovery, a pause and the deletion.
// At every step the resource has at most two series in the whole scrape
// (helmapp_resource_info and helmapp_release_info), and none once deleted.
func TestSecureMetricsFollowTheResource(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "metrics")
	addr := tu.FreeAddress(t)
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns}, func(oc *operator.Config) {
		oc.MetricsBindAddress = addr
		oc.RetryBase, oc.RetryMax = time.Second, 2*time.Second
	})
	url := "https://" + addr + "/metrics"

	reader, stranger := tu.ServiceAccountToken(t, cfg, c, ns, "scraper"), tu.ServiceAccountToken(t, cfg, c, ns, "stranger")
	tu.BindMetricsReader(t, c, filepath.Join("config", "rbac", "metrics_reader_role.yaml"), ns, "scraper")

	tu.Eventually(t, time.Minute, "the metrics endpoint to refuse a scrape without a token", func() (bool, string) {
		code, body := tu.Scrape(url, "")
		return code == http.StatusUnauthorized, fmt.Sprintf("HTTP %d: %.200s", code, body)
	})
	// Authorization is decided by the API server (SubjectAccessReview); a
	// fresh binding takes a moment to be seen, a missing one never is.
	if code, body := tu.Scrape(url, stranger); code != http.StatusForbidden {
		t.Errorf("scrape with a token lacking metrics-reader: HTTP %d, want 403: %.200s", code, body)
	}
	tu.Eventually(t, time.Minute, "a scrape with the metrics-reader token to succeed", func() (bool, string) {
		code, body := tu.Scrape(url, reader)
		return code == http.StatusOK, fmt.Sprintf("HTTP %d: %.200s", code, body)
	})

	cr := tu.NewCR(tu.NginxGVK, ns, "web", map[string]any{"replicaCount": int64(1)})
	if err := c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	res := resource{ns: ns, name: "web"}
	waitFor(t, url, reader, "Ready=True and revision 1 after the install", func(m families) string {
		return m.infoIs(res, "True", status.ReasonInstallSuccessful, "False") + m.releaseIs(res, "1") +
			m.actionCount("Nginx", status.ActionInstall, metrics.OutcomeSuccess, 1) +
			m.reconciles("Nginx", metrics.ResultSuccess, status.ReasonInstallSuccessful)
	})

	// A real API server denial fails the upgrade: Ready=False, the failure counted.
	remove := tu.DenyInNamespace(t, c, ns+"-big-deployments", ns,
		[]admissionv1.NamedRuleWithOperations{tu.Rule("apps", "deployments", admissionv1.Create, admissionv1.Update)},
		admissionv1.Validation{Expression: "!has(object.spec.replicas) || object.spec.replicas <= 5", Message: "big Deployments are not allowed here"})
	waitDenied(t, c, ns)
	setReplicas(t, c, ns, "web", 9)
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonUpgradeError)
	waitFor(t, url, reader, "Ready=False and ReleaseFailed=True after the denied upgrade", func(m families) string {
		return m.infoIs(res, "False", status.ReasonUpgradeError, "False") + m.releaseIs(res, "1") +
			m.actionCount("Nginx", status.ActionUpgrade, metrics.OutcomeFailure, 1) +
			m.reconciles("Nginx", metrics.ResultError, status.ReasonUpgradeError)
	})

	// The policy goes, the retried upgrade succeeds: the gauges recover.
	remove()
	u := tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	rev, _, _ := unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision")
	waitFor(t, url, reader, "Ready=True and the new revision after the recovery", func(m families) string {
		return m.infoIs(res, "True", status.ReasonUpgradeSuccessful, "False") + m.releaseIs(res, fmt.Sprint(rev)) +
			m.actionCount("Nginx", status.ActionUpgrade, metrics.OutcomeSuccess, 1)
	})

	// kube-state-metrics with config/prometheus/kube-state-metrics would
	// label the resource as the operator's own two series do.
	waitFor(t, url, reader, "the kube-state-metrics config's labels of the live resource to agree with the operator's series", func(m families) string {
		live, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
		if err != nil {
			return err.Error()
		}
		return m.agreesWithKSM(res, ksmLabels(t, "Nginx", live))
	})

	// Paused: the state series says so, still one series, the release kept.
	setAnnotation(t, c, ns, "web", release.AnnotationPaused, "true")
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypePaused, metav1.ConditionTrue, status.ReasonReconcilePaused)
	waitFor(t, url, reader, "paused=True while paused", func(m families) string {
		return m.infoIs(res, "True", status.ReasonUpgradeSuccessful, "True") + m.releaseIs(res, fmt.Sprint(rev))
	})
	setAnnotation(t, c, ns, "web", release.AnnotationPaused, "")
	waitFor(t, url, reader, "paused=False once resumed", func(m families) string {
		return m.infoIs(res, "True", status.ReasonUpgradeSuccessful, "False")
	})
	u, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
	if err != nil {
		t.Fatal(err)
	}

	// Deleted: none of its series is left.
	if err := c.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource to be gone", func() (bool, string) {
		_, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	waitFor(t, url, reader, "no series of the deleted resource", func(m families) string {
		if n := m.seriesOf(res); n > 0 {
			return fmt.Sprintf("%d series of %s/%s left; ", n, ns, "web")
		}
		return ""
	})
}

func setReplicas(t *testing.T, c client.Client, ns, name string, n int64) {
	t.Helper()
	// A patch: the operator writes the resource too.
	tu.PatchSpec(t, c, tu.NginxGVK, ns, name, map[string]any{"replicaCount": n})
}

// waitDenied waits until the API server enforces the policy against big Deployments in ns.
func waitDenied(t *testing.T, c client.Client, ns string) {
	t.Helper()
	tu.Eventually(t, 30*time.Second, "the policy against big Deployments to be in force", func() (bool, string) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "probe", "namespace": ns},
			"spec": map[string]any{"replicas": int64(9),
				"selector": map[string]any{"matchLabels": map[string]any{"app": "probe"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "probe"}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "probe"}}}}},
		}}
		err := c.Create(context.Background(), u, client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprint(err)
	})
}

// families is one scrape, parsed.
type families map[string]*dto.MetricFamily

type resource struct{ ns, name string }

// waitFor scrapes until check finds nothing missing (returns "").
func waitFor(t *testing.T, url, token, what string, check func(families) string) {
	t.Helper()
	tu.Eventually(t, time.Minute, what, func() (bool, string) {
		code, body := tu.Scrape(url, token)
		if code != http.StatusOK {
			return false, fmt.Sprintf("HTTP %d: %.200s", code, body)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		m, err := p.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			return false, err.Error()
		}
		missing := check(m)
		return missing == "", missing
	})
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func (f families) metrics(name string, match map[string]string) []*dto.Metric {
	var out []*dto.Metric
	fam := f[name]
	if fam == nil {
		return nil
	}
next:
	for _, m := range fam.GetMetric() {
		l := labelsOf(m)
		for k, v := range match {
			if l[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// infoIs says what is wrong unless the resource has exactly one
// helmapp_resource_info series, of value 1, with Ready's status ready and
// reason and paused as given, and at most two series in the whole scrape.
func (f families) infoIs(r resource, ready, reason, paused string) string {
	if n := f.seriesOf(r); n > 2 {
		return fmt.Sprintf("%d series of %s/%s in the scrape, want at most 2: %v; ", n, r.ns, r.name, f.namesOf(r))
	}
	ms := f.metrics(metrics.ResourceInfo, map[string]string{"kind": "Nginx", "namespace": r.ns, "name": r.name})
	if len(ms) != 1 {
		return fmt.Sprintf("%d resource_info series, want 1; ", len(ms))
	}
	l := labelsOf(ms[0])
	if l["ready"] != ready || l["reason"] != reason || l["paused"] != paused || ms[0].GetGauge().GetValue() != 1 {
		return fmt.Sprintf("resource_info %v = %v, want ready=%s reason=%s paused=%s; ", l, ms[0].GetGauge().GetValue(), ready, reason, paused)
	}
	return ""
}

// releaseIs says what is wrong unless the resource has one release_info
// series, of revision rev of the nginx chart.
func (f families) releaseIs(r resource, rev string) string {
	ms := f.metrics(metrics.ReleaseInfo, map[string]string{"kind": "Nginx", "namespace": r.ns, "name": r.name})
	if len(ms) != 1 {
		return fmt.Sprintf("%d release_info series, want 1; ", len(ms))
	}
	l := labelsOf(ms[0])
	if l["revision"] != rev || l["chart"] != "nginx" || l["chart_version"] == "" || ms[0].GetGauge().GetValue() != 1 {
		return fmt.Sprintf("release_info %v = %v, want revision %s of chart nginx; ", l, ms[0].GetGauge().GetValue(), rev)
	}
	return ""
}

// actionCount says what is wrong unless at least n Helm actions of kind were
// observed with the outcome.
func (f families) actionCount(kind, action, outcome string, n uint64) string {
	var got uint64
	for _, m := range f.metrics(metrics.HelmActionDuration, map[string]string{"kind": kind, "action": action, "outcome": outcome}) {
		got += m.GetHistogram().GetSampleCount()
	}
	if got < n {
		var all []string
		for _, m := range f.metrics(metrics.HelmActionDuration, nil) {
			all = append(all, fmt.Sprint(labelsOf(m), m.GetHistogram().GetSampleCount()))
		}
		return fmt.Sprintf("%d %s %s observations, want at least %d (have %v); ", got, action, outcome, n, all)
	}
	return ""
}

// reconciles says what is wrong unless some reconcile of kind ended with result and reason.
func (f families) reconciles(kind, result, reason string) string {
	for _, m := range f.metrics(metrics.ReconcileTotal, map[string]string{"kind": kind, "result": result, "reason": reason}) {
		if m.GetCounter().GetValue() > 0 {
			return ""
		}
	}
	return fmt.Sprintf("no reconcile_total{result=%q,reason=%q}; ", result, reason)
}

// seriesOf counts the series of the scrape, of any metric, labelled with
// r's namespace and name.
func (f families) seriesOf(r resource) int {
	return len(f.namesOf(r))
}

// namesOf lists the metric name of each series labelled with r's namespace and name.
func (f families) namesOf(r resource) []string {
	var out []string
	for name := range f {
		for range f.metrics(name, map[string]string{"namespace": r.ns, "name": r.name}) {
			out = append(out, name)
		}
	}
	return out
}

// setAnnotation sets the annotation key of the Nginx name in ns to value,
// or removes it when value is empty.
func setAnnotation(t *testing.T, c client.Client, ns, name, key, value string) {
	t.Helper()
	tu.Eventually(t, 30*time.Second, "the annotation "+key+" to be written", func() (bool, string) {
		u, err := tu.Get(t, c, tu.NginxGVK, ns, name)
		if err != nil {
			return false, err.Error()
		}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if value == "" {
			delete(ann, key)
		} else {
			ann[key] = value
		}
		u.SetAnnotations(ann)
		err = c.Update(context.Background(), u) // a conflict with the operator's write is retried
		return err == nil, fmt.Sprint(err)
	})
}

// agreesWithKSM says what is wrong unless the labels kube-state-metrics
// would give the resource (ksm) say what its helmapp_resource_info and
// helmapp_release_info series say.
func (f families) agreesWithKSM(r resource, ksm map[string]string) string {
	want := map[string]string{"name": r.name, "exported_namespace": r.ns}
	if ms := f.metrics(metrics.ResourceInfo, map[string]string{"namespace": r.ns, "name": r.name}); len(ms) == 1 {
		for _, k := range []string{"ready", "reason", "stalled", "reconciling"} {
			want[k] = labelsOf(ms[0])[k]
		}
	} else {
		return fmt.Sprintf("%d resource_info series; ", len(ms))
	}
	if ms := f.metrics(metrics.ReleaseInfo, map[string]string{"namespace": r.ns, "name": r.name}); len(ms) == 1 {
		for _, k := range []string{"revision", "chart", "chart_version"} {
			want[k] = labelsOf(ms[0])[k]
		}
	} else {
		return fmt.Sprintf("%d release_info series; ", len(ms))
	}
	for k, v := range want {
		if ksm[k] != v {
			return fmt.Sprintf("kube-state-metrics label %s = %q, the operator's series say %q (all: %v); ", k, ksm[k], v, ksm)
		}
	}
	return ""
}
