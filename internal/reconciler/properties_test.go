package reconciler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A reconcile of a deployed, unchanged resource writes nothing: no status
// write, no Helm revision, no object update.
func TestNoWritesWhenNothingChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	// Let the reconcile that follows the last status write settle.
	time.Sleep(time.Second)
	dep := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, dep); err != nil {
		t.Fatal(err)
	}
	writes, gets, objectWrites := e.statusPatches.Load(), e.gets.Load(), e.objectWrites.Load()
	// The operator's own writes do not wake it up again.
	time.Sleep(2 * time.Second)
	if n := e.gets.Load() - gets; n != 0 {
		t.Errorf("%d reconciles ran with nothing changed: the operator's own writes trigger it", n)
	}

	for i := 0; i < 3; i++ {
		e.poke(tu.NginxGVK, "web")
		want := gets + int64(i+1)
		tu.Eventually(t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
			return e.gets.Load() >= want, "no reconcile yet"
		})
	}
	time.Sleep(time.Second)
	if n := e.statusPatches.Load() - writes; n != 0 {
		t.Errorf("%d status writes for reconciles that changed nothing", n)
	}
	if n := e.objectWrites.Load() - objectWrites; n != 0 {
		t.Errorf("%d writes to the release's objects for re-applies that found no drift", n)
	}
	if h := history(t, e.ns, "web"); len(h) != 1 {
		t.Errorf("%d Helm revisions, want 1", len(h))
	}
	after := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != dep.ResourceVersion {
		t.Errorf("re-applying an unchanged release updated the Deployment")
	}
}

// Status is patched, not replaced: what others write under status survives.
func TestStatusIsPatchedNotReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")

	u := e.get(tu.NginxGVK, "web")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": "ExternalCheck", "status": "True", "reason": "Checked",
		"message": "written by another controller", "lastTransitionTime": "2026-01-01T00:00:00Z"})
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds, "externalNote": "kept"}})
	if err := e.c.Status().Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if nested(u, "status", "externalNote") != "kept" {
		t.Errorf("a status field written by someone else was lost: %v", u.Object["status"])
	}
	if c := tu.Condition(u, "ExternalCheck"); c == nil || c.Message != "written by another controller" {
		t.Errorf("a condition written by someone else was lost: %s", tu.Describe(u))
	}
}

// observedGeneration follows the spec; lastTransitionTime moves only when a
// condition's status flips.
func TestGenerationsAndTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(tu.NginxGVK, "web", map[string]any{})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	checkContract(t, u)
	deployed := tu.Condition(u, status.TypeDeployed).LastTransitionTime
	initialized := tu.Condition(u, status.TypeInitialized).LastTransitionTime
	time.Sleep(1100 * time.Millisecond) // lastTransitionTime has a resolution of one second

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	checkContract(t, u)
	if u.GetGeneration() != 2 {
		t.Fatalf("generation %d, want 2", u.GetGeneration())
	}
	if got := tu.Condition(u, status.TypeDeployed).LastTransitionTime; !got.Equal(&deployed) {
		t.Errorf("Deployed stayed True but its lastTransitionTime moved from %s to %s", deployed, got)
	}
	if got := tu.Condition(u, status.TypeInitialized).LastTransitionTime; !got.Equal(&initialized) {
		t.Errorf("Initialized stayed True but its lastTransitionTime moved")
	}
	if g, _, _ := unstructured.NestedInt64(u.Object, "status", "lastAttemptedGeneration"); g != 2 {
		t.Errorf("lastAttemptedGeneration %d, want 2", g)
	}
}

// A secret in a resource's values (from a Secret: issue 42 made the spec a
// place for what is not secret, shown in messages) appears in no status
// field, no event and no info-level log line, even when the API server
// quotes it in an error, while the spec's value beside it is shown; chart
// NOTES and manifests never reach status either.
func TestValuesNotesAndManifestsStayInTheCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const secret = "s3cr3t-T0ken-0f-the-day"
	e.putSecret("page", map[string]string{"values.yaml": "page:\n  body: " + secret + "\n"})
	cr := e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1)}, map[string]any{"kind": "Secret", "name": "page"})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")

	// A policy whose denial quotes the ConfigMap's data, secret included.
	e.policy("quote-data", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Update)},
		admissionv1.Validation{Expression: "false", MessageExpression: "'refusing page: ' + object.data['index.html'].replace('\\n', ' ')"})
	e.waitDenied("ConfigMap updates", func(ctx context.Context) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}}
		return e.c.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"index.html":"probe"}}`)), client.DryRunAll)
	})
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "New title"}})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	msg := conditionMessage(u, status.TypeReleaseFailed)
	if !strings.Contains(msg, "refusing page") || !strings.Contains(msg, status.RedactedMark) || !strings.Contains(msg, "New title") {
		t.Errorf("the denial should be reported with the Secret's value redacted and the spec's title shown; got %q", msg)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventUpgradeFailed)

	raw, _ := json.Marshal(u.Object["status"])
	if strings.Contains(string(raw), secret) {
		t.Errorf("the secret value is in the status: %s", raw)
	}
	for _, forbidden := range []string{"NOTES", "kind: Deployment", "apiVersion: apps/v1", "<html>"} {
		if strings.Contains(string(raw), forbidden) {
			t.Errorf("the status carries chart content (%q): %s", forbidden, raw)
		}
	}
	for _, ev := range e.events(cr) {
		if strings.Contains(ev.Message, secret) || strings.Contains(ev.Action, secret) {
			t.Errorf("event %s carries the secret: %s", ev.Reason, ev.Message)
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, secret) {
		t.Errorf("an info-level log line carries the secret:\n%s", grepLines(logs, secret))
	} else if !strings.Contains(logs, "refusing page") {
		t.Errorf("the operator's log does not show the failure at all; the log check proves nothing")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Install, upgrade and uninstall each leave a Normal event.
func TestSuccessEvents(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, finalizerAlways)) // UninstallSucceeded is the deletion path's
	cr := e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventInstallSucceeded)
	if !strings.Contains(ev.Message, "revision 1") {
		t.Errorf("InstallSucceeded says %q", ev.Message)
	}
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventUpgradeSucceeded)
	seen := e.recordStatuses(tu.NginxGVK, "web")
	if err := e.c.Delete(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource to be deleted", func() (bool, string) {
		_, err := tu.Get(t, e.c, tu.NginxGVK, e.ns, "web")
		return apierrors.IsNotFound(err), "still there"
	})
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventUninstallSucceeded)
	// Before it went away, the resource said the release was uninstalled.
	said := false
	for _, s := range seen() {
		said = said || (tu.ConditionIs(s, status.TypeDeployed, metav1.ConditionFalse, status.ReasonUninstallSuccessful) &&
			tu.ConditionIs(s, status.TypeReleaseFailed, metav1.ConditionFalse, status.ReasonUninstallSuccessful))
	}
	if !said {
		t.Errorf("no status said Deployed=False UninstallSuccessful before the resource went away")
	}
}

// `kubectl wait --for=condition=Ready` returns once the release is deployed.
func TestKubectlWaitForReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(tu.NginxGVK, "web", map[string]any{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := cp.Kubectl(ctx, "wait", "-n", e.ns, "--for=condition=Ready", "--timeout=90s", "nginx/web")
	if err != nil {
		t.Fatalf("kubectl wait: %v", err)
	}
	if !strings.Contains(out, "condition met") {
		t.Errorf("kubectl wait said %q", out)
	}
	u := e.get(tu.NginxGVK, "web")
	if nested(u, "status", "deployedRelease", "revision") != int64(1) {
		t.Errorf("kubectl wait returned before the release was deployed: %s", tu.Describe(u))
	}
}

// An upgrade that takes long (here a hook Job that never completes, until
// the watch's timeout) says so while it runs: Reconciling=True with what is
// under way, and Ready=Unknown.
func TestLongActionShowsProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(hookedGVK, "u", map[string]any{})
	e.wait(hookedGVK, "u", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	seen := e.recordStatuses(hookedGVK, "u")
	e.patchSpec(hookedGVK, "u", map[string]any{"block": true})
	e.wait(hookedGVK, "u", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	progress := false
	for _, s := range seen() {
		if tu.ConditionIs(s, status.TypeReconciling, metav1.ConditionTrue, status.ReasonProgressing) &&
			conditionMessage(s, status.TypeReconciling) == "Upgrading release u to revision 2" &&
			tu.ConditionIs(s, status.TypeReady, metav1.ConditionUnknown, status.ReasonProgressing) {
			progress = true
		}
	}
	if !progress {
		t.Errorf("no status showed Reconciling=True \"Upgrading release u to revision 2\" while the upgrade ran")
	}
}
