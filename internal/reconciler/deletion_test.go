package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

func (e *env) waitGone(gvk schema.GroupVersionKind, name string) {
	e.t.Helper()
	tu.Eventually(e.t, 2*time.Minute, gvk.Kind+" "+name+" to be gone", func() (bool, string) {
		u, err := tu.Get(e.t, e.c, gvk, e.ns, name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, safeConditions(u)
	})
}

func safeConditions(u *unstructured.Unstructured) string {
	if _, ok := u.Object["status"].(map[string]any); !ok {
		return "no status"
	}
	return tu.Describe(u)
}

func ownedBy(m metav1.Object, uid types.UID) bool {
	for _, r := range m.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// helmapp.io/uninstall-on-delete: "false" lets the resource go and keeps the
// release: its history and its objects survive the garbage collector (which
// runs on this control plane: a canary the resource owns is collected).
// A value that is not a boolean stalls the resource, also while deleting.
func TestUninstallOnDeleteFalseKeepsTheRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: e.ns, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: tu.NginxGVK.GroupVersion().String(), Kind: tu.NginxGVK.Kind, Name: "web", UID: cr.GetUID()}}}}
	if err := e.c.Create(context.Background(), canary); err != nil {
		t.Fatal(err)
	}

	// A typo stalls the resource before and during its deletion.
	e.annotate(tu.NginxGVK, "web", map[string]any{reconciler.AnnotationUninstallOnDelete: "nope"})
	u := e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
	expect(t, u, "Ready=False/InvalidAnnotation", "Irreconcilable=True/InvalidAnnotation", "Deployed=True/InstallSuccessful")
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, reconciler.AnnotationUninstallOnDelete) || !strings.Contains(msg, `"nope"`) {
		t.Errorf("Stalled message %q does not name the annotation and its value", msg)
	}
	if err := e.c.Delete(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
	if fs := u.GetFinalizers(); len(fs) != 1 || fs[0] != reconciler.Finalizer {
		t.Errorf("finalizers %v while the annotation is invalid", fs)
	}

	e.annotate(tu.NginxGVK, "web", map[string]any{reconciler.AnnotationUninstallOnDelete: "false"})
	e.waitGone(tu.NginxGVK, "web")
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventReleaseKept)
	if !strings.Contains(ev.Message, "Release web was kept") {
		t.Errorf("ReleaseKept event says %q", ev.Message)
	}
	tu.Eventually(t, 2*time.Minute, "the garbage collector to delete the canary", func() (bool, string) {
		err := e.c.Get(context.Background(), client.ObjectKeyFromObject(canary), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), "canary still there"
	})

	h := history(t, e.ns, "web")
	if len(h) != 1 || h[0].Info.Status != release.StatusDeployed {
		t.Fatalf("the kept release has %d revisions", len(h))
	}
	refs, err := readiness.ObjectsFromManifest(h[0].Manifest, e.ns, nil)
	if err != nil || len(refs) < 3 {
		t.Fatalf("objects of the release: %v %v", refs, err)
	}
	for _, ref := range refs {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(ref.GroupVersionKind())
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, m); err != nil {
			t.Errorf("%s of the kept release: %v", ref, err)
		} else if ownedBy(m, cr.GetUID()) {
			t.Errorf("%s is still owned by the deleted resource", ref)
		}
	}
	secrets := &corev1.SecretList{}
	if err := e.c.List(context.Background(), secrets, client.InNamespace(e.ns), client.MatchingLabels{"owner": "helm", "name": "web"}); err != nil || len(secrets.Items) != 1 {
		t.Fatalf("release Secrets: %d %v", len(secrets.Items), err)
	}
	if ownedBy(&secrets.Items[0], cr.GetUID()) {
		t.Errorf("the release Secret is still owned by the deleted resource")
	}
}

// uninstallWait: true keeps the finalizer until the release's objects are
// gone, saying which ones it waits for.
func TestUninstallWaitKeepsTheFinalizerUntilObjectsAreGone(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "uninstallWait: true"))
	cr := e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, "")
	const hold = "test.helmapp.io/hold"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: e.ns}}
	if err := e.c.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+hold+`"]}}`))); err != nil {
		t.Fatal(err)
	}

	if err := e.c.Delete(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	u := e.wait(gadgetGVK, "g", status.TypeReconciling, metav1.ConditionTrue, status.ReasonDeleting)
	expect(t, u, "Ready=Unknown/Deleting", "Deployed=False/UninstallSuccessful", "ReleaseFailed=False/UninstallSuccessful")
	if msg := conditionMessage(u, status.TypeReconciling); msg != "Waiting for 1 objects of release g to be deleted: ConfigMap/g" {
		t.Errorf("Reconciling message %q", msg)
	}
	if fs := u.GetFinalizers(); len(fs) != 1 || fs[0] != reconciler.Finalizer {
		t.Errorf("finalizers %v while objects remain", fs)
	}
	if h := history(t, e.ns, "g"); len(h) != 1 || h[0].Info.Status != release.StatusUninstalled {
		t.Errorf("while waiting, the history should hold the uninstalled revision: %d revisions", len(h))
	}

	if err := e.c.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	e.waitGone(gadgetGVK, "g")
	if h := history(t, e.ns, "g"); len(h) != 0 {
		t.Errorf("the history was not purged: %d revisions", len(h))
	}
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventUninstallSucceeded)
}
