package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/status"
)

func cond(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: "a message that must never be a label"}
}

// TestResourceInfoLabels records statuses on a registry of its own and
// reads back the one helmapp_resource_info series of the resource: its
// labels say Ready's status and reason, Stalled, Reconciling and Paused, and
// nothing else (no message, no free text).
func TestResourceInfoLabels(t *testing.T) {
	for _, tt := range []struct {
		name  string
		conds []metav1.Condition
		want  map[string]string
	}{
		{"not reconciled yet", nil,
			map[string]string{"ready": "Unknown", "reason": "Unknown", "stalled": "Unknown", "reconciling": "Unknown", "paused": "False"}},
		{"ready", []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful),
			cond(status.TypeStalled, metav1.ConditionFalse, status.ReasonNotStalled),
			cond(status.TypeReconciling, metav1.ConditionFalse, status.ReasonSucceeded),
		}, map[string]string{"ready": "True", "reason": "InstallSuccessful", "stalled": "False", "reconciling": "False", "paused": "False"}},
		{"stalled and paused", []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionFalse, status.ReasonReleaseNameConflict),
			cond(status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseNameConflict),
			cond(status.TypeReconciling, metav1.ConditionFalse, status.ReasonStalled),
			cond(status.TypePaused, metav1.ConditionTrue, status.ReasonReconcilePaused),
		}, map[string]string{"ready": "False", "reason": "ReleaseNameConflict", "stalled": "True", "reconciling": "False", "paused": "True"}},
		{"a reason that is not a word of the contract", []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionFalse, "secret=hunter2"),
			cond(status.TypeReconciling, "Maybe", status.ReasonRetrying),
		}, map[string]string{"ready": "False", "reason": "Unknown", "stalled": "Unknown", "reconciling": "Unknown", "paused": "False"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec, err := metrics.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			rec.Reconciled("Nginx", object("ns", "web"), status.Status{Conditions: tt.conds}, nil, false)
			ms := gather(t, reg)[metrics.ResourceInfo]
			if len(ms) != 1 {
				t.Fatalf("%d %s series, want 1", len(ms), metrics.ResourceInfo)
			}
			got := labelsOf(ms[0])
			for k, v := range map[string]string{"kind": "Nginx", "namespace": "ns", "name": "web"} {
				tt.want[k] = v
			}
			if len(got) != len(tt.want) {
				t.Errorf("labels %v, want exactly %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("label %s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if v := ms[0].GetGauge().GetValue(); v != 1 {
				t.Errorf("value %v, want 1", v)
			}
		})
	}
}

// TestTwoSeriesPerResource drives one resource through an install, a
// failure, an upgrade and its deletion, beside a second resource: it never
// has more than two series (its state and its release), a change of labels
// replaces the old series, and Forget leaves none of it and all of the other.
func TestTwoSeriesPerResource(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	web, other := object("ns", "web"), object("ns", "other")
	deployed := func(rev int) *status.DeployedRelease {
		return &status.DeployedRelease{Revision: rev, Chart: "nginx", ChartVersion: "0.1.0"}
	}
	steps := []struct {
		name        string
		s           status.Status
		wantReady   string
		wantRelease string // "" for no release series
	}{
		{"installing", status.Status{Conditions: []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionUnknown, status.ReasonProgressing),
			cond(status.TypeReconciling, metav1.ConditionTrue, status.ReasonProgressing)}}, "Unknown", ""},
		{"installed", status.Status{DeployedRelease: deployed(1), Conditions: []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)}}, "True", "1"},
		{"upgrade failed", status.Status{DeployedRelease: deployed(1), Conditions: []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionFalse, status.ReasonUpgradeError)}}, "False", "1"},
		{"upgraded", status.Status{DeployedRelease: deployed(3), Conditions: []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)}}, "True", "3"},
		{"uninstalled", status.Status{Conditions: []metav1.Condition{
			cond(status.TypeReady, metav1.ConditionFalse, status.ReasonUninstallSuccessful)}}, "False", ""},
	}
	rec.Reconciled("Nginx", other, steps[1].s, nil, false)
	for _, step := range steps {
		rec.Reconciled("Nginx", web, step.s, nil, false)
		m := gather(t, reg)
		info, rel := of(m[metrics.ResourceInfo], "web"), of(m[metrics.ReleaseInfo], "web")
		if n := len(info) + len(rel); n > 2 {
			t.Errorf("%s: %d series of the resource, want at most 2", step.name, n)
		}
		if len(info) != 1 || labelsOf(info[0])["ready"] != step.wantReady {
			t.Errorf("%s: resource_info %v, want one series with ready=%s", step.name, labelSets(info), step.wantReady)
		}
		switch {
		case step.wantRelease == "" && len(rel) != 0:
			t.Errorf("%s: release_info %v, want none", step.name, labelSets(rel))
		case step.wantRelease != "" && (len(rel) != 1 || labelsOf(rel[0])["revision"] != step.wantRelease):
			t.Errorf("%s: release_info %v, want one series of revision %s", step.name, labelSets(rel), step.wantRelease)
		}
	}
	rec.Forget("Nginx", "ns", "web")
	m := gather(t, reg)
	if n := len(of(m[metrics.ResourceInfo], "web")) + len(of(m[metrics.ReleaseInfo], "web")); n != 0 {
		t.Errorf("%d series of the forgotten resource left", n)
	}
	if n := len(of(m[metrics.ResourceInfo], "other")) + len(of(m[metrics.ReleaseInfo], "other")); n != 2 {
		t.Errorf("the other resource has %d series after the first was forgotten, want 2", n)
	}
}

func object(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func gather(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, f := range fams {
		out[f.GetName()] = f.GetMetric()
	}
	return out
}

func of(ms []*dto.Metric, name string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range ms {
		if labelsOf(m)["name"] == name {
			out = append(out, m)
		}
	}
	return out
}

func labelSets(ms []*dto.Metric) string {
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimSpace(strings.ReplaceAll(m.String(), "\n", " ")))
	}
	return strings.Join(out, "; ")
}
