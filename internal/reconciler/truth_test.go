package reconciler_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// An upgrade that succeeds but whose read-back from Helm's storage fails
// clears the failed upgrade before it: ReleaseFailed says the upgrade
// succeeded, the failure is the read-back's, and once the storage reads again
// the resource is Ready (issue 10 item 1).
func TestSucceededUpgradeIsNotHiddenByAFailedReadBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	allow := e.denyBigDeployments()
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)

	// The retry's upgrade succeeds; reading the storage back fails.
	e.failAfterDeploy.Store(true)
	allow()
	got := e.waitStatus(tu.NginxGVK, "web", "the upgrade to succeed and its read-back to fail", func(u *unstructured.Unstructured) bool {
		return tu.ConditionIs(u, status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonErrorGettingReleaseState) &&
			!e.failAfterDeploy.Load()
	})
	expect(t, got, "ReleaseFailed=False/UpgradeSuccessful", "Ready=False/ErrorGettingReleaseState", "Reconciling=True/Retrying")
	e.waitEvent(u, corev1.EventTypeNormal, reconciler.EventUpgradeSucceeded)

	e.failStorageQuery.Store(false)
	got = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	expect(t, got, "ReleaseFailed=False/UpgradeSuccessful", "Irreconcilable=False/ReconcileSuccessful")
	// Revision 3 unless a retry raced the policy's removal and failed once more.
	consistentHistory(t, e.ns, "web", got)
}

// A reconcile that fails after reading the release (here: a spec the chart
// refuses to render) judges the deployed revision's objects all the same:
// their readiness is never an old verdict passed off as current (item 2).
func TestReadinessIsJudgedOnFailurePaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.patchSpec(gadgetGVK, "g", map[string]any{"fail": true})
	e.wait(gadgetGVK, "g", status.TypeStalled, metav1.ConditionTrue, status.ReasonChartRenderError)

	if err := e.c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	got := e.wait(gadgetGVK, "g", status.TypeResourcesReady, metav1.ConditionFalse, status.ReasonResourcesNotFound)
	expect(t, got, "Stalled=True/ChartRenderError", "Deployed=True/InstallSuccessful")
	if c := tu.Condition(got, status.TypeResourcesReady); c.ObservedGeneration != got.GetGeneration() {
		t.Errorf("ResourcesReady judged now has observedGeneration %d, generation %d", c.ObservedGeneration, got.GetGeneration())
	}
}

// An object of the release that cannot be read makes ResourcesReady Unknown
// with its own reason, naming the object and the error; the reconcile is
// retried rather than waiting for readiness that nobody can see (item 3).
func TestUnreadableObjectHasItsOwnReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	forbidden := func(obj client.Object) error {
		if _, ok := obj.(*unstructured.Unstructured); ok && obj.GetName() == "g" && obj.GetNamespace() == e.ns &&
			obj.GetObjectKind().GroupVersionKind().Kind == "ConfigMap" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "g", errInjected)
		}
		return nil
	}
	e.readFault.Store(&forbidden)
	e.poke(gadgetGVK, "g")
	got := e.wait(gadgetGVK, "g", status.TypeResourcesReady, metav1.ConditionUnknown, status.ReasonResourcesUnreadable)
	expect(t, got, "Reconciling=True/Retrying", "Stalled=False/NotStalled")
	if msg := conditionMessage(got, status.TypeResourcesReady); !strings.Contains(msg, "ConfigMap g") || !strings.Contains(msg, "forbidden") {
		t.Errorf("ResourcesReady message %q does not name the object and the error", msg)
	}

	e.readFault.Store(nil)
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
}

var errInjected = injectedError("injected: access denied")

type injectedError string

func (e injectedError) Error() string { return string(e) }

// A status write that fails is written again soon, even while the failure it
// reports backs off for long: Ready=True does not stand while reconciles fail
// (item 4).
func TestFailedStatusWriteIsRetriedDespiteTheBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *operator.Config) { c.RetryBase, c.RetryMax = 10*time.Minute, 10*time.Minute })
	u := e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	fail := func(obj client.Object) error {
		if obj.GetName() == "g" {
			return apierrors.NewInternalError(errInjected)
		}
		return nil
	}
	e.statusPatchFault.Store(&fail)
	e.failStorageQuery.Store(true)
	// A new process: one that holds the settled release in its memo would
	// not read the storage at all (release.Memo).
	e.restart()
	e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventReconcileFailed)
	if !tu.ConditionIs(e.get(gadgetGVK, "g"), status.TypeReady, metav1.ConditionTrue, "") {
		t.Fatal("the status was written although every status write fails")
	}
	e.statusPatchFault.Store(nil)
	got := e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionFalse, status.ReasonErrorGettingReleaseState)
	expect(t, got, "Irreconcilable=True/ErrorGettingReleaseState", "Reconciling=True/Retrying")
	if n := nested(got, "status", "failures"); n != int64(1) {
		t.Errorf("failures = %v, want 1", n)
	}
}

// A resource stalled by its chart is evaluated once: later triggers of the
// same generation write no status and emit no event (item 5).
func TestStalledGenerationStaysQuiet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.patchSpec(gadgetGVK, "g", map[string]any{"fail": true})
	e.wait(gadgetGVK, "g", status.TypeStalled, metav1.ConditionTrue, status.ReasonChartRenderError)
	e.settle(gadgetGVK, "g")
	writes, events := e.statusPatches.Load(), e.countEvents(u, reconciler.EventUpgradeFailed)
	if events != 1 {
		t.Fatalf("%d UpgradeFailed events for one stalled generation, want 1", events)
	}
	for range 3 {
		e.settle(gadgetGVK, "g")
	}
	if n := e.statusPatches.Load() - writes; n != 0 {
		t.Errorf("%d status writes for a stalled generation poked 3 times, want 0", n)
	}
	if n := e.countEvents(u, reconciler.EventUpgradeFailed); n != 1 {
		t.Errorf("%d UpgradeFailed events after 3 pokes, want 1", n)
	}
	expect(t, e.get(gadgetGVK, "g"), "Stalled=True/ChartRenderError", "Ready=False/ChartRenderError")
}

// finalizerRace wraps the operator's client so that, right before its next
// patch of a watched resource, race runs on the API server: another
// controller changing the finalizers in between.
func finalizerRace(race *atomic.Pointer[func()]) func(*operator.Config) {
	return func(c *operator.Config) {
		inner := c.WrapClient
		c.WrapClient = func(cl client.Client) client.Client {
			return interceptor.NewClient(noWatch{inner(cl)}, interceptor.Funcs{
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if f := race.Swap(nil); f != nil && ownKind(obj) {
						(*f)()
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
			})
		}
	}
}

// Another controller's finalizer, added or removed while the operator adds
// or removes its own, is neither dropped nor brought back (item 6).
func TestForeignFinalizersSurvive(t *testing.T) {
	t.Parallel()
	var race atomic.Pointer[func()]
	e := newEnvWatching(t, testWatches(t, finalizerAlways), finalizerRace(&race)) // the finalizer is added whatever the release
	ctx := context.Background()
	setFinalizers := func(fins ...string) func() {
		return func() {
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fins}})
			if err := e.c.Patch(ctx, tu.NewCR(gadgetGVK, e.ns, "g", nil), client.RawPatch("application/merge-patch+json", b)); err != nil {
				t.Errorf("the other controller's finalizer patch: %v", err)
			}
		}
	}
	add := setFinalizers("test.helmapp.io/first", "test.helmapp.io/second")
	race.Store(&add)
	u := tu.NewCR(gadgetGVK, e.ns, "g", map[string]any{})
	u.SetFinalizers([]string{"test.helmapp.io/first"})
	if err := e.c.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	got := e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	want := []string{"test.helmapp.io/first", "test.helmapp.io/second", "helmapp.io/uninstall-release"}
	if fins := got.GetFinalizers(); !sameSet(fins, want) {
		t.Fatalf("finalizers after the operator added its own: %v, want %v", fins, want)
	}

	// The second controller finishes while the operator removes its finalizer.
	remove := setFinalizers("test.helmapp.io/first", "helmapp.io/uninstall-release")
	race.Store(&remove)
	if err := e.c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 2*time.Minute, "the operator's finalizer to come off", func() (bool, string) {
		fins := e.get(gadgetGVK, "g").GetFinalizers()
		return slices.Equal(fins, []string{"test.helmapp.io/first"}), strings.Join(fins, ",")
	})
	if n := e.countEvents(got, reconciler.EventReconcileFailed); n != 0 {
		t.Errorf("%d ReconcileFailed events while removing the finalizer", n)
	}
	setFinalizers()()
	e.waitGone(gadgetGVK, "g")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The uninstall's outcome survives a failed removal of the finalizer (here
// denied by an admission policy): the status says the release was
// uninstalled, and that the finalizer is what is retried (items 7, 10).
func TestUninstallOutcomeSurvivesAFailedFinalizerRemoval(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, finalizerAlways)) // the uninstall path is the subject
	u := e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	const fin = "'helmapp.io/uninstall-release'"
	allow := e.policy("keep-finalizer", []admissionv1.NamedRuleWithOperations{rule("test.helmapp.io", "gadgets", admissionv1.Update)},
		admissionv1.Validation{
			Expression: "!(has(oldObject.metadata.finalizers) && " + fin + " in oldObject.metadata.finalizers) || " +
				"(has(object.metadata.finalizers) && " + fin + " in object.metadata.finalizers)",
			Message: "the finalizer may not be removed here"})
	e.waitDenied("removing the finalizer", func(ctx context.Context) error {
		return e.c.Patch(ctx, tu.NewCR(gadgetGVK, e.ns, "g", nil),
			client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)), client.DryRunAll)
	})
	if err := e.c.Delete(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	got := e.wait(gadgetGVK, "g", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonErrorRemovingFinalizer)
	expect(t, got, "ReleaseFailed=False/UninstallSuccessful", "Deployed=False/UninstallSuccessful",
		"Ready=False/ErrorRemovingFinalizer", "Reconciling=True/Retrying")
	if h := history(t, e.ns, "g"); len(h) != 0 {
		t.Errorf("%d revisions left after the uninstall", len(h))
	}
	// Retried for the finalizer only: no second uninstall is announced.
	e.waitStatus(gadgetGVK, "g", "the finalizer's removal to be retried", func(u *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "failures")
		return n >= 3
	})
	if n := e.countEvents(u, reconciler.EventUninstallFailed); n != 0 {
		t.Errorf("%d UninstallFailed events for an uninstall that succeeded", n)
	}
	if n := e.countEvents(u, reconciler.EventUninstallSucceeded); n != 1 {
		t.Errorf("%d UninstallSucceeded events for one uninstall, want 1", n)
	}
	expect(t, e.get(gadgetGVK, "g"), "ReleaseFailed=False/UninstallSuccessful", "Irreconcilable=True/ErrorRemovingFinalizer")
	allow()
	e.waitGone(gadgetGVK, "g")
}

// An uninstall shows its progress before it starts: Ready=Unknown
// Progressing, "Uninstalling release g" (item 8).
func TestUninstallShowsProgress(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, finalizerAlways)) // the uninstall path is the subject
	e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	seen := e.recordStatuses(gadgetGVK, "g")
	if err := e.c.Delete(context.Background(), e.get(gadgetGVK, "g")); err != nil {
		t.Fatal(err)
	}
	e.waitGone(gadgetGVK, "g")
	var readies []string
	for _, s := range seen() {
		if c := tu.Condition(s, status.TypeReady); c != nil {
			readies = append(readies, string(c.Status)+"/"+c.Reason+": "+c.Message)
		}
	}
	if !slices.Contains(readies, "Unknown/Progressing: Uninstalling release g") {
		t.Errorf("no Ready=Unknown Progressing before the uninstall; Ready was %q", readies)
	}
}

// Reasons produced only by faults, each through a real one or the real part
// wrapped (item 10): NoFailure, ErrorGettingClient, ErrorGettingValues.
// ErrorRemovingFinalizer is in TestUninstallOutcomeSurvivesAFailedFinalizerRemoval,
// ReleaseLocked (ReleasePending's successor) in locks_test.go.
func TestFaultReasons(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "overrideValues: {page.title: Overridden}"))

	t.Run("NoFailure", func(t *testing.T) {
		e.createAnnotated("bad", map[string]any{}, map[string]string{"helmapp.io/paused": "perhaps"})
		got := e.wait(gadgetGVK, "bad", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
		expect(t, got, "ReleaseFailed=False/NoFailure")
	})
	t.Run("ErrorGettingValues", func(t *testing.T) {
		// The spec's page is a string: the override page.title cannot be set in it.
		e.create(widgetGVK, "w", map[string]any{"page": "plain"})
		got := e.wait(widgetGVK, "w", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonErrorGettingValues)
		expect(t, got, "Ready=False/ErrorGettingValues", "ReleaseFailed=False/NoFailure", "Reconciling=True/Retrying")
		if msg := conditionMessage(got, status.TypeIrreconcilable); !strings.Contains(msg, "page.title") {
			t.Errorf("message %q does not name the override", msg)
		}
	})
	t.Run("ErrorGettingClient", func(t *testing.T) {
		fail := func(obj client.Object) error {
			if obj.GetName() == "nc" {
				return errInjected
			}
			return nil
		}
		e.clientFault.Store(&fail)
		e.create(gadgetGVK, "nc", map[string]any{})
		got := e.wait(gadgetGVK, "nc", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonErrorGettingClient)
		expect(t, got, "Ready=False/ErrorGettingClient", "Reconciling=True/Retrying", "Initialized=True/Initialized")
		e.clientFault.Store(nil)
		e.wait(gadgetGVK, "nc", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	})
}
