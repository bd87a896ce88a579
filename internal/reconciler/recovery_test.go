package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// annotate sets (or, with a nil value, removes) annotations of the resource.
func (e *env) annotate(gvk schema.GroupVersionKind, name string, kv map[string]any) {
	e.t.Helper()
	e.mergePatch(gvk, name, map[string]any{"metadata": map[string]any{"annotations": kv}})
}

// settle makes sure the operator reconciled the resource after what was just
// done: it pokes it and waits until the operator has read it again.
func (e *env) settle(gvk schema.GroupVersionKind, name string) {
	e.t.Helper()
	gets := e.gets.Load()
	e.poke(gvk, name)
	tu.Eventually(e.t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
		return e.gets.Load() > gets, "no reconcile yet"
	})
	// The reconcile that read it has had time to run what it would run.
	time.Sleep(2 * time.Second)
}

// waitStatus waits until the resource's status satisfies ok.
func (e *env) waitStatus(gvk schema.GroupVersionKind, name, what string, ok func(u *unstructured.Unstructured) bool) *unstructured.Unstructured {
	e.t.Helper()
	var u *unstructured.Unstructured
	tu.Eventually(e.t, 2*time.Minute, what, func() (bool, string) {
		u = e.get(gvk, name)
		return ok(u), tu.Describe(u)
	})
	return u
}

func exhausted(failures int64, retry string, gen int64) func(u *unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		f, _, _ := unstructured.NestedInt64(u.Object, "status", "failures")
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		r, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledRetry")
		return f == failures && r == retry && og == gen &&
			tu.ConditionIs(u, status.TypeStalled, metav1.ConditionTrue, status.ReasonRetriesExhausted)
	}
}

// Retries are bounded: an upgrade the API server denies for ever stores
// maxRetries failed revisions, then none, whatever wakes the operator, a
// restart included; the retry annotation and a spec change each give a
// fresh budget.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "maxRetries: 2"))
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.denyBigDeployments()
	revisions := func(want int, when string) {
		t.Helper()
		if h := history(t, e.ns, "web"); len(h) != want {
			t.Errorf("%s: Helm stores %d revisions, want %d", when, len(h), want)
		}
	}

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.waitStatus(tu.NginxGVK, "web", "the retries to be exhausted", exhausted(2, "", 2))
	expect(t, u, "Ready=False/RetriesExhausted", "Reconciling=False/Stalled", "ReleaseFailed=True/UpgradeError",
		"Deployed=True/InstallSuccessful")
	msg := conditionMessage(u, status.TypeStalled)
	for _, want := range []string{"Gave up after 2 consecutive failures (maxRetries 2)", bigDeploymentsDenied} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message %q lacks %q", msg, want)
		}
	}
	if !strings.Contains(conditionMessage(u, status.TypeReconciling), rel.AnnotationRetry) {
		t.Errorf("Reconciling message %q does not say how to retry", conditionMessage(u, status.TypeReconciling))
	}
	revisions(3, "after the budget of 2") // the install and two failed upgrades

	// Nothing but the spec or the retry annotation starts an attempt: not
	// another annotation, not a release object changing.
	e.settle(tu.NginxGVK, "web")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}}
	if err := e.c.Patch(context.Background(), cm, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	e.settle(tu.NginxGVK, "web")
	revisions(3, "after a poke and a touched object")

	// The retry annotation: a fresh attempt and a fresh budget, recorded.
	e.annotate(tu.NginxGVK, "web", map[string]any{rel.AnnotationRetry: "1"})
	e.waitStatus(tu.NginxGVK, "web", "the retry to be used up", exhausted(2, "1", 2))
	revisions(5, "after the retry annotation")
	// The same value again does nothing.
	e.annotate(tu.NginxGVK, "web", map[string]any{rel.AnnotationRetry: "1", "test.helmapp.io/poke": "again"})
	e.settle(tu.NginxGVK, "web")
	revisions(5, "after the same retry value again")

	// A restarted operator, which remembers nothing, reads the verdict back.
	e.restart()
	e.settle(tu.NginxGVK, "web")
	revisions(5, "after a restart")
	if u := e.get(tu.NginxGVK, "web"); !exhausted(2, "1", 2)(u) {
		t.Errorf("the status moved: %s", tu.Describe(u))
	}

	// A spec change: a fresh budget for the new generation.
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(8)})
	e.waitStatus(tu.NginxGVK, "web", "the new generation's retries to be used up", exhausted(2, "1", 3))
	e.settle(tu.NginxGVK, "web")
	revisions(7, "after a spec change")
	h := history(t, e.ns, "web")
	deployed := 0
	for _, r := range h {
		if r.Info.Status == release.StatusDeployed {
			deployed++
		} else if r.Info.Status != release.StatusFailed {
			t.Errorf("revision %d is %s", r.Version, r.Info.Status)
		}
	}
	if deployed != 1 {
		t.Errorf("%d deployed revisions, want 1", deployed)
	}

	// And a spec that can deploy recovers.
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(3)})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	expect(t, u, "Stalled=False/NotStalled")
}

// Pause: while helmapp.io/paused is "true" nothing runs — no upgrade of a
// changed spec, no re-apply of drift, no uninstall of a deleted resource —
// and the status keeps what it knew; removing it applies what changed.
func TestPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cr := e.create(gadgetGVK, "g", map[string]any{"data": map[string]any{"greeting": "hello"}})
	before := e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	e.annotate(gadgetGVK, "g", map[string]any{rel.AnnotationPaused: "true"})
	u := e.wait(gadgetGVK, "g", status.TypePaused, metav1.ConditionTrue, status.ReasonReconcilePaused)
	if msg := conditionMessage(u, status.TypePaused); !strings.Contains(msg, rel.AnnotationPaused) {
		t.Errorf("Paused message %q does not name the annotation", msg)
	}
	// Everything but Paused is as it was; kstatus sees a Current resource.
	same := func(u *unstructured.Unstructured, when string) {
		t.Helper()
		for _, f := range []string{"deployedRelease", "failedRelease", "resources", "failures", "observedGeneration"} {
			if a, b := fmt.Sprint(nested(before, "status", f)), fmt.Sprint(nested(u, "status", f)); a != b {
				t.Errorf("%s: status.%s changed from %s to %s", when, f, a, b)
			}
		}
		conds, _, _ := unstructured.NestedSlice(before.Object, "status", "conditions")
		for _, c := range conds {
			typ := c.(map[string]any)["type"].(string)
			if got, want := fmt.Sprint(tu.Condition(u, typ)), fmt.Sprint(tu.Condition(before, typ)); got != want {
				t.Errorf("%s: condition %s changed from %s to %s", when, typ, want, got)
			}
		}
	}
	same(u, "paused")
	if res, err := kstatus.Compute(u); err != nil || res.Status != kstatus.CurrentStatus {
		t.Errorf("kstatus sees a paused resource as %v (%v)", res, err)
	}

	// A spec change is seen (Paused observes the new generation) but not applied.
	e.patchSpec(gadgetGVK, "g", map[string]any{"data": map[string]any{"greeting": "changed"}})
	u = e.waitStatus(gadgetGVK, "g", "Paused to observe generation 2", func(u *unstructured.Unstructured) bool {
		c := tu.Condition(u, status.TypePaused)
		return c != nil && c.ObservedGeneration == 2
	})
	same(u, "paused, spec changed")
	// Drift is not corrected: the ConfigMap deleted by hand stays deleted.
	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	e.settle(gadgetGVK, "g")
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "g"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a paused release's object was re-applied: %v", err)
	}
	if h := history(t, e.ns, "g"); len(h) != 1 {
		t.Errorf("a Helm action ran while paused: %d revisions", len(h))
	}
	same(e.get(gadgetGVK, "g"), "paused, drifted")

	// Resuming applies the spec change; Paused goes away.
	e.annotate(gadgetGVK, "g", map[string]any{rel.AnnotationPaused: nil})
	u = e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	expect(t, u)
	if tu.Condition(u, status.TypePaused) != nil {
		t.Errorf("Paused stays after resuming: %s", tu.Describe(u))
	}
	got := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "g"}, got); err != nil || got.Data["greeting"] != "changed" {
		t.Errorf("the spec change was not applied on resume: %v %v", got.Data, err)
	}

	// A paused resource that is deleted keeps its release until resumed.
	e.annotate(gadgetGVK, "g", map[string]any{rel.AnnotationPaused: "true"})
	e.wait(gadgetGVK, "g", status.TypePaused, metav1.ConditionTrue, status.ReasonReconcilePaused)
	if err := e.c.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	u = e.waitStatus(gadgetGVK, "g", "Paused to say the deletion waits", func(u *unstructured.Unstructured) bool {
		return strings.Contains(conditionMessage(u, status.TypePaused), "deletion waits")
	})
	e.settle(gadgetGVK, "g")
	if len(e.get(gadgetGVK, "g").GetFinalizers()) != 1 || len(history(t, e.ns, "g")) != 2 {
		t.Errorf("a paused deletion uninstalled: finalizers %v, %d revisions", u.GetFinalizers(), len(history(t, e.ns, "g")))
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "g"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("a paused deletion removed the release's ConfigMap: %v", err)
	}
	e.annotate(gadgetGVK, "g", map[string]any{rel.AnnotationPaused: "false"})
	tu.Eventually(t, time.Minute, "the resource to be uninstalled and deleted once resumed", func() (bool, string) {
		_, err := tu.Get(t, e.c, gadgetGVK, e.ns, "g")
		return apierrors.IsNotFound(err), "still there"
	})
	if h := history(t, e.ns, "g"); len(h) != 0 {
		t.Errorf("%d release Secrets left after the uninstall", len(h))
	}
}
