package reconciler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

const bigDeploymentsDenied = "deployments with more than 5 replicas are not allowed here"

// denyBigDeployments makes the API server reject Deployments of more than 5 replicas.
func (e *env) denyBigDeployments() func() {
	remove := e.policy("big-deployments",
		[]admissionv1.NamedRuleWithOperations{rule("apps", "deployments", admissionv1.Create, admissionv1.Update)},
		admissionv1.Validation{Expression: "object.spec.replicas <= 5", Message: bigDeploymentsDenied})
	e.waitDenied("big Deployments", func(ctx context.Context) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](9),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
		}}
		return e.c.Create(ctx, d, client.DryRunAll)
	})
	return remove
}

// recordStatuses records every status the API server stores for the resource.
func (e *env) recordStatuses(gvk schema.GroupVersionKind, name string) func() []*unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	w, err := tu.WatchClient(e.t, cfg).Watch(context.Background(), list, client.InNamespace(e.ns))
	if err != nil {
		e.t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*unstructured.Unstructured
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetName() == name && ev.Type != watch.Deleted {
				mu.Lock()
				seen = append(seen, u)
				mu.Unlock()
			}
		}
	}()
	return func() []*unstructured.Unstructured {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// Path 1 and 9: the API server rejects an object of the chart at install.
func TestInstallRejectedByTheAPIServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.denyBigDeployments()
	stop := e.recordStatuses(tu.NginxGVK, "web")

	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	expect(t, u, "Ready=False/InstallError", "Deployed=False/NotDeployed", "Stalled=False/NotStalled",
		"Reconciling=True/Retrying", "Initialized=True/Initialized")
	msg := conditionMessage(u, status.TypeReleaseFailed)
	for _, want := range []string{"Install of release web failed", `deployments.apps "web"`, bigDeploymentsDenied} {
		if !strings.Contains(msg, want) {
			t.Errorf("ReleaseFailed message %q does not contain %q", msg, want)
		}
	}
	if nested(u, "status", "failedRelease", "action") != "install" || nested(u, "status", "failedRelease", "revision") == nil {
		t.Errorf("failedRelease = %v", nested(u, "status", "failedRelease"))
	}
	if nested(u, "status", "deployedRelease") != nil {
		t.Errorf("deployedRelease is set though nothing is deployed: %v", nested(u, "status", "deployedRelease"))
	}
	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventInstallFailed)
	if !strings.Contains(ev.Message, bigDeploymentsDenied) {
		t.Errorf("InstallFailed event %q does not carry the API server's error", ev.Message)
	}
	if h := history(t, e.ns, "web"); len(h) == 0 || h[0].Info.Status != release.StatusFailed {
		t.Errorf("Helm history does not end with the failed install: %d revisions", len(h))
	}

	// Fixing the spec installs it.
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	expect(t, u, "Deployed=True/InstallSuccessful", "ReleaseFailed=False/InstallSuccessful")
	if f, _, _ := unstructured.NestedInt64(u.Object, "status", "failures"); f != 0 {
		t.Errorf("failures = %d after a success", f)
	}
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventInstallSucceeded)

	// Path 9: while it failed, no status ever looked healthy.
	for _, s := range stop() {
		if tu.ConditionIs(s, status.TypeDeployed, metav1.ConditionTrue, "") && nested(s, "status", "deployedRelease") == nil {
			t.Errorf("a status said Deployed=True with no deployed release: %s", tu.Describe(s))
		}
		if g := s.GetGeneration(); g == 1 && tu.ConditionIs(s, status.TypeReady, metav1.ConditionTrue, "") {
			t.Errorf("generation 1 (which cannot install) was published Ready=True: %s", tu.Describe(s))
		}
	}
}

// Path 2: an upgrade fails after a good install, then the spec is fixed.
func TestUpgradeRejectedKeepsTheDeployedRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.denyBigDeployments()

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	expect(t, u, "Ready=False/UpgradeError", "Deployed=True/InstallSuccessful", "Reconciling=True/Retrying", "Stalled=False/")
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("deployedRelease.revision = %v, want the old revision 1", rev)
	}
	if nested(u, "status", "failedRelease", "action") != "upgrade" || nested(u, "status", "failedRelease", "revision").(int64) < 2 {
		t.Errorf("failedRelease = %v", nested(u, "status", "failedRelease"))
	}
	if msg := conditionMessage(u, status.TypeReleaseFailed); !strings.Contains(msg, bigDeploymentsDenied) || !strings.Contains(msg, "Upgrade of release web to revision") {
		t.Errorf("ReleaseFailed message %q", msg)
	}
	dep := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, dep); err != nil || *dep.Spec.Replicas != 2 {
		t.Errorf("the deployed Deployment changed: %v %v", dep.Spec.Replicas, err)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventUpgradeFailed)

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(3)})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	expect(t, u, "ReleaseFailed=False/UpgradeSuccessful", "Deployed=True/UpgradeSuccessful", "Reconciling=False/Succeeded")
	if f, _, _ := unstructured.NestedInt64(u.Object, "status", "failures"); f != 0 {
		t.Errorf("failures = %d after recovery", f)
	}
	if nested(u, "status", "failedRelease", "action") != "upgrade" {
		t.Errorf("failedRelease was not kept for inspection: %v", nested(u, "status", "failedRelease"))
	}
	h := history(t, e.ns, "web")
	if h[len(h)-1].Info.Status != release.StatusDeployed || len(h) > 10 {
		t.Errorf("history after recovery: %d revisions, latest %s", len(h), h[len(h)-1].Info.Status)
	}
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(h[len(h)-1].Version) {
		t.Errorf("deployedRelease.revision %v, Helm's deployed revision %d", rev, h[len(h)-1].Version)
	}
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventUpgradeSucceeded)
}

// Path 3: values the chart rejects, and a chart that does not render, stall
// the resource without writing a revision or touching what is deployed.
func TestRejectedValuesStall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name   string
		gvk    schema.GroupVersionKind
		spec   map[string]any
		reason string
		says   string
	}{
		{"wrong-type", widgetGVK, map[string]any{"replicaCount": "three"}, status.ReasonInvalidValues, "replicaCount"},
		{"unknown-key", widgetGVK, map[string]any{"replicas": int64(3)}, status.ReasonInvalidValues, "replicas"},
		{"schema-minimum", gadgetGVK, map[string]any{"count": int64(-1)}, status.ReasonInvalidValues, "count"},
		{"template-error", gadgetGVK, map[string]any{"fail": true}, status.ReasonChartRenderError, "the chart refuses to render"},
	}
	for _, tc := range cases {
		// At install: nothing is stored.
		e.create(tc.gvk, tc.name, tc.spec)
		u := e.wait(tc.gvk, tc.name, status.TypeStalled, metav1.ConditionTrue, tc.reason)
		expect(t, u, "Ready=False/"+tc.reason, "ReleaseFailed=True/InstallError", "Reconciling=False/Stalled", "Deployed=False/NotDeployed")
		if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, tc.says) {
			t.Errorf("%s: Stalled message %q does not name %q", tc.name, msg, tc.says)
		}
		if h := history(t, e.ns, tc.name); len(h) != 0 {
			t.Errorf("%s: Helm stored %d revisions for rejected values", tc.name, len(h))
		}
		if rev := nested(u, "status", "failedRelease", "revision"); rev != nil {
			t.Errorf("%s: failedRelease.revision = %v though Helm stored none", tc.name, rev)
		}
	}

	// A long error is cut at 1024 bytes with a visible mark.
	e.create(gadgetGVK, "long", map[string]any{"fail": true, "failRepeat": int64(200)})
	u := e.wait(gadgetGVK, "long", status.TypeStalled, metav1.ConditionTrue, status.ReasonChartRenderError)
	for _, typ := range []string{status.TypeStalled, status.TypeReleaseFailed, status.TypeReady} {
		if msg := conditionMessage(u, typ); len(msg) > status.MaxMessageLength || !strings.HasSuffix(msg, status.TruncationMark) {
			t.Errorf("%s message: %d bytes, ends %q", typ, len(msg), msg[max(0, len(msg)-30):])
		}
	}
	if msg, _ := nested(u, "status", "failedRelease", "message").(string); len(msg) > status.MaxMessageLength {
		t.Errorf("failedRelease.message is %d bytes", len(msg))
	}

	// On an existing release: the deployed revision and its objects stay.
	e.create(widgetGVK, "deployed", map[string]any{"replicaCount": int64(2)})
	e.wait(widgetGVK, "deployed", status.TypeReady, metav1.ConditionTrue, "")
	e.patchSpec(widgetGVK, "deployed", map[string]any{"replicaCount": "lots"})
	u = e.wait(widgetGVK, "deployed", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidValues)
	expect(t, u, "ReleaseFailed=True/UpgradeError", "Deployed=True/", "Ready=False/InvalidValues")
	if h := history(t, e.ns, "deployed"); len(h) != 1 || h[0].Info.Status != release.StatusDeployed {
		t.Errorf("rejected values wrote a revision: %d revisions", len(h))
	}
	dep := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "deployed"}, dep); err != nil || *dep.Spec.Replicas != 2 {
		t.Errorf("the deployed Deployment changed: %v %v", dep.Spec.Replicas, err)
	}
}

// Path 4: re-applying the objects of an existing release is denied.
func TestReapplyDeniedIsIrreconcilable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, "")
	e.policy("no-configmaps", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "false", Message: "configmaps may not be created here"})
	e.waitDenied("ConfigMaps", func(ctx context.Context) error {
		return e.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns}}, client.DryRunAll)
	})
	// Someone deletes the chart's ConfigMap; the operator must recreate it.
	if err := e.c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	e.poke(gadgetGVK, "g")
	u := e.wait(gadgetGVK, "g", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonReconcileError)
	expect(t, u, "Deployed=True/InstallSuccessful", "Ready=False/ReconcileError", "ReleaseFailed=False/")
	if msg := conditionMessage(u, status.TypeIrreconcilable); !strings.Contains(msg, "configmaps may not be created here") {
		t.Errorf("Irreconcilable message %q", msg)
	}
	if nested(u, "status", "failedRelease", "action") != "reconcile" {
		t.Errorf("failedRelease = %v", nested(u, "status", "failedRelease"))
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventReconcileFailed)
	if h := history(t, e.ns, "g"); len(h) != 1 {
		t.Errorf("re-applying wrote revisions: %d", len(h))
	}
}

// Path 5: the uninstall fails (a pre-delete hook is denied): the finalizer
// stays and the status says the deletion is retried.
func TestUninstallFailureKeepsTheFinalizer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := e.create(gadgetGVK, "g", map[string]any{"preDeleteHook": true})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, "")
	remove := e.policy("no-hooks", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "!has(object.metadata.labels) || !('helmapp.io/test-hook' in object.metadata.labels)",
			Message: "hook configmaps are not allowed"})
	e.waitDenied("hook ConfigMaps", func(ctx context.Context) error {
		return e.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns,
			Labels: map[string]string{"helmapp.io/test-hook": "x"}}}, client.DryRunAll)
	})

	if err := e.c.Delete(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	u := e.wait(gadgetGVK, "g", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUninstallError)
	expect(t, u, "Reconciling=True/Retrying", "Ready=False/UninstallError")
	if msg := conditionMessage(u, status.TypeReconciling); !strings.Contains(msg, "deletion is being retried") {
		t.Errorf("Reconciling message %q does not say the deletion is retried", msg)
	}
	if msg := conditionMessage(u, status.TypeReleaseFailed); !strings.Contains(msg, "hook configmaps are not allowed") {
		t.Errorf("ReleaseFailed message %q does not carry the denial", msg)
	}
	if fs := u.GetFinalizers(); len(fs) != 1 || fs[0] != reconciler.Finalizer {
		t.Errorf("finalizers = %v", fs)
	}
	if nested(u, "status", "failedRelease", "action") != "uninstall" {
		t.Errorf("failedRelease = %v", nested(u, "status", "failedRelease"))
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventUninstallFailed)
	// Helm records the attempt on the release (status uninstalling) but keeps
	// its one revision and deletes nothing before the pre-delete hook succeeds.
	if h := history(t, e.ns, "g"); len(h) != 1 {
		t.Errorf("the failed uninstall changed the history: %d revisions", len(h))
	}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "g"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the release's ConfigMap is gone though the uninstall failed: %v", err)
	}

	remove()
	tu.Eventually(t, time.Minute, "the resource to be deleted once the uninstall can proceed", func() (bool, string) {
		_, err := tu.Get(t, e.c, gadgetGVK, e.ns, "g")
		return apierrors.IsNotFound(err), "still there"
	})
	if h := history(t, e.ns, "g"); len(h) != 0 {
		t.Errorf("%d release Secrets left after the uninstall", len(h))
	}
}

// Path 6: Helm's storage cannot be read. A process that holds the settled
// release in its memo reads nothing (release.Memo), so the fault meets a
// new process, which must read the release's latest record.
func TestUnreadableReleaseState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")

	e.failStorageQuery.Store(true)
	e.restart()
	u := e.wait(tu.NginxGVK, "web", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonErrorGettingReleaseState)
	expect(t, u, "Deployed=True/InstallSuccessful", "Ready=False/ErrorGettingReleaseState", "Reconciling=True/Retrying")
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("a transient error erased deployedRelease: %v", nested(u, "status", "deployedRelease"))
	}

	e.failStorageQuery.Store(false)
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Irreconcilable=False/ReconcileSuccessful")
}

// Path 7: the finalizer cannot be added; the status is written all the same.
func TestFinalizerCannotBeAdded(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, finalizerAlways)) // the finalizer is added whatever the release
	remove := e.policy("no-finalizers", []admissionv1.NamedRuleWithOperations{rule("web.helmapp.io", "nginxes", admissionv1.Update)},
		admissionv1.Validation{Expression: "!has(object.metadata.finalizers) || size(object.metadata.finalizers) == 0",
			Message: "finalizers are not allowed on nginxes here"})
	e.create(tu.NginxGVK, "probe", map[string]any{})
	e.waitDenied("finalizers", func(ctx context.Context) error {
		u := tu.NewCR(tu.NginxGVK, e.ns, "probe", nil)
		return e.c.Patch(ctx, u, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":["x"]}}`)), client.DryRunAll)
	})

	e.create(tu.NginxGVK, "web", map[string]any{})
	u := e.wait(tu.NginxGVK, "web", status.TypeInitialized, metav1.ConditionFalse, status.ReasonErrorAddingFinalizer)
	expect(t, u, "Irreconcilable=True/ErrorAddingFinalizer", "Ready=False/ErrorAddingFinalizer")
	if msg := conditionMessage(u, status.TypeInitialized); !strings.Contains(msg, "finalizers are not allowed on nginxes here") {
		t.Errorf("Initialized message %q", msg)
	}
	if h := history(t, e.ns, "web"); len(h) != 0 {
		t.Errorf("a release was installed without the finalizer in place")
	}

	remove()
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Initialized=True/Initialized")
}

// Path 8: the status write fails (a conflict; a size the server refuses) and
// is retried, never dropped.
func TestStatusWriteFaultsAreRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var conflicts, tooLarge int
	var mu sync.Mutex
	fault := func(obj client.Object) error {
		mu.Lock()
		defer mu.Unlock()
		u := obj.(*unstructured.Unstructured)
		if conflicts == 0 {
			conflicts++
			return apierrors.NewConflict(schema.GroupResource{Group: u.GroupVersionKind().Group, Resource: "x"}, u.GetName(), nil)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if msg, _ := c.(map[string]any)["message"].(string); len(msg) > 256 {
				tooLarge++
				return apierrors.NewRequestEntityTooLargeError("injected: the status is too large")
			}
		}
		return nil
	}
	e.statusPatchFault.Store(&fault)

	e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	e.create(gadgetGVK, "g", map[string]any{"fail": true, "failRepeat": int64(40)})
	u := e.wait(gadgetGVK, "g", status.TypeStalled, metav1.ConditionTrue, status.ReasonChartRenderError)
	msg := conditionMessage(u, status.TypeStalled)
	if len(msg) > 256 || !strings.HasSuffix(msg, status.TruncationMark) {
		t.Errorf("after a size refusal the message should be shortened with a mark; got %d bytes: %q", len(msg), msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if conflicts != 1 || tooLarge == 0 {
		t.Errorf("faults injected: %d conflicts, %d size refusals; the test did not exercise them", conflicts, tooLarge)
	}
}

// Helm reports an install as a success even when it could not record the
// outcome in its storage; the status believes the storage.
func TestUnrecordedInstallIsNotASuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.failStorageUpdate.Store(true)
	e.create(gadgetGVK, "g", map[string]any{})
	u := e.wait(gadgetGVK, "g", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	if msg := conditionMessage(u, status.TypeReleaseFailed); !strings.Contains(msg, "did not complete: Helm's storage shows revision 1 as pending-install") {
		t.Errorf("ReleaseFailed message %q", msg)
	}
	if tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, "") || tu.ConditionIs(u, status.TypeDeployed, metav1.ConditionTrue, "") {
		t.Errorf("an unrecorded install looks healthy: %s", tu.Describe(u))
	}
}
