package reconciler_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// sortedHistory is the release's history, oldest first.
func sortedHistory(t *testing.T, ns, name string) []*release.Release {
	h := history(t, ns, name)
	sort.Slice(h, func(i, j int) bool { return h[i].Version < h[j].Version })
	return h
}

// ourLabels are the labels this operator puts on a revision (chart digest, owner).
func ourLabels(r *release.Release) map[string]string {
	out := map[string]string{}
	for k, v := range r.Labels {
		if strings.HasPrefix(k, "helmapp.io/") {
			out[k] = v
		}
	}
	return out
}

// slowRetries makes the first retry wait an hour, so a test reads the state a
// failure left before any retry changes it; a spec change still goes through.
func slowRetries(c *operator.Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour }

// upgradeRemediation: rollback rolls a failed upgrade back, and says so.
func TestUpgradeRemediationRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "upgradeRemediation: rollback"), slowRetries)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.denyBigDeployments()

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	expect(t, u, "Ready=False/UpgradeError", "Deployed=True/RollbackSuccessful", "Reconciling=True/Retrying", "Stalled=False/NotStalled")
	msg := conditionMessage(u, status.TypeReleaseFailed)
	if !strings.HasPrefix(msg, "Upgrade of release web to revision 2 failed") || !strings.Contains(msg, bigDeploymentsDenied) ||
		!strings.HasSuffix(msg, "; rolled back to revision 1") {
		t.Errorf("ReleaseFailed message %q", msg)
	}
	if nested(u, "status", "failedRelease", "revision") != int64(2) || nested(u, "status", "failedRelease", "action") != "upgrade" ||
		!strings.HasSuffix(nested(u, "status", "failedRelease", "message").(string), "; rolled back to revision 1") {
		t.Errorf("failedRelease = %v, want the failed attempt, revision 2", nested(u, "status", "failedRelease"))
	}
	if nested(u, "status", "deployedRelease", "revision") != int64(3) || nested(u, "status", "deployedRelease", "status") != "deployed" {
		t.Errorf("deployedRelease = %v, want the rollback, revision 3", nested(u, "status", "deployedRelease"))
	}

	h := sortedHistory(t, e.ns, "web")
	var got []string
	for _, r := range h {
		got = append(got, r.Info.Status.String())
	}
	if strings.Join(got, ",") != "superseded,failed,deployed" {
		t.Fatalf("history %v, want superseded,failed,deployed", got)
	}
	if d := h[2].Info.Description; d != "Rollback to 1" {
		t.Errorf("revision 3 is described %q", d)
	}
	if want, have := ourLabels(h[0]), ourLabels(h[2]); len(want) == 0 || !equalMaps(want, have) {
		t.Errorf("the rolled-back revision has labels %v, revision 1 had %v", have, want)
	}
	if h[2].Labels[rel.LabelChartDigest] == "" {
		t.Errorf("the rolled-back revision lost the chart digest label: %v", h[2].Labels)
	}
	dep := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, dep); err != nil || *dep.Spec.Replicas != 2 {
		t.Errorf("the Deployment is not the rolled-back one: %v %v", dep.Spec.Replicas, err)
	}
	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventUpgradeFailed)
	if !strings.HasSuffix(ev.Message, "; rolled back to revision 1") {
		t.Errorf("UpgradeFailed event %q does not say it rolled back", ev.Message)
	}
}

// After a rollback the deployed values differ from the spec, so the operator
// upgrades again: each retry waits its backoff, and the history stays
// bounded (helm-operator-plugins #224).
func TestUpgradeRemediationDoesNotLoop(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "upgradeRemediation: rollback"))
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.denyBigDeployments()
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})

	var failures int64
	tu.Eventually(t, 3*time.Minute, "several failed rounds", func() (bool, string) {
		failures, _, _ = unstructured.NestedInt64(e.get(tu.NginxGVK, "web").Object, "status", "failures")
		return failures >= 5, ""
	})
	h := sortedHistory(t, e.ns, "web")
	latest := h[len(h)-1].Version
	// Each failed round writes two revisions (the failed upgrade, the
	// rollback); one more round may be under way.
	if limit := 1 + 2*(int(failures)+1); latest > limit {
		t.Errorf("%d revisions written for %d failures (at most %d): retries bypass the backoff", latest, failures, limit)
	}
	if len(h) > rel.DefaultMaxHistory {
		t.Errorf("%d revisions kept, more than %d", len(h), rel.DefaultMaxHistory)
	}
	deployed := 0
	for _, r := range h {
		if r.Info.Status == release.StatusDeployed {
			deployed++
		}
	}
	if deployed > 1 {
		t.Errorf("%d deployed revisions", deployed)
	}

	// Fixing the spec upgrades over it.
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(3)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	h = sortedHistory(t, e.ns, "web")
	top := h[len(h)-1]
	if top.Info.Status != release.StatusDeployed || nested(u, "status", "deployedRelease", "revision") != int64(top.Version) {
		t.Errorf("after the fix: latest revision %d is %s, deployedRelease %v", top.Version, top.Info.Status, nested(u, "status", "deployedRelease", "revision"))
	}
	for _, r := range h[:len(h)-1] {
		if r.Info.Status == release.StatusDeployed || r.Info.Status.IsPending() {
			t.Errorf("revision %d is %s after the fix", r.Version, r.Info.Status)
		}
	}
}

// installRemediation: uninstall removes a failed install, its objects and its
// history, so that the next attempt is a fresh install at revision 1.
func TestInstallRemediationUninstalls(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "installRemediation: uninstall"), slowRetries)
	e.denyBigDeployments()
	w, err := tu.WatchClient(t, cfg).Watch(context.Background(), &corev1.ConfigMapList{}, client.InNamespace(e.ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	expect(t, u, "Ready=False/InstallError", "Deployed=False/NotDeployed", "Reconciling=True/Retrying")
	msg := conditionMessage(u, status.TypeReleaseFailed)
	if !strings.Contains(msg, bigDeploymentsDenied) || !strings.HasSuffix(msg, "; the failed install was uninstalled; the next attempt installs afresh") {
		t.Errorf("ReleaseFailed message %q", msg)
	}
	if nested(u, "status", "failedRelease", "revision") != int64(1) || nested(u, "status", "failedRelease", "action") != "install" {
		t.Errorf("failedRelease = %v", nested(u, "status", "failedRelease"))
	}
	if h := history(t, e.ns, "web"); len(h) != 0 {
		t.Errorf("the failed install left %d revisions", len(h))
	}
	// The failed install created the chart's ConfigMap; the remediation removed it.
	var seen []string
	timeout := time.After(30 * time.Second)
read:
	for {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == "web" {
				seen = append(seen, string(ev.Type))
				if ev.Type == watch.Deleted {
					break read
				}
			}
		case <-timeout:
			break read
		}
	}
	if len(seen) < 2 || seen[0] != string(watch.Added) || seen[len(seen)-1] != string(watch.Deleted) {
		t.Errorf("ConfigMap web events %v: want it created by the failed install and deleted", seen)
	}
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T web of the failed install is still there: %v", o, err)
		}
	}

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if h := history(t, e.ns, "web"); len(h) != 1 || h[0].Version != 1 || h[0].Info.Status != release.StatusDeployed {
		t.Errorf("after the fix the history is not one deployed revision 1: %d revisions", len(h))
	}
	if nested(u, "status", "deployedRelease", "revision") != int64(1) {
		t.Errorf("deployedRelease = %v", nested(u, "status", "deployedRelease"))
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
