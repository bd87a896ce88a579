package reconciler_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// latest returns the newest revision of the release.
func latest(t *testing.T, ns, name string) *release.Release {
	t.Helper()
	h := history(t, ns, name)
	if len(h) == 0 {
		t.Fatalf("release %s has no revision", name)
	}
	sort.Slice(h, func(i, j int) bool { return h[i].Version < h[j].Version })
	return h[len(h)-1]
}

// hookRevision is the revision at which the release's post-install /
// post-upgrade hook last ran, read from the ConfigMap it leaves; "none" when
// it never ran.
func (e *env) hookRevision(name string) string {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name + "-post-hook"}, cm)
	if apierrors.IsNotFound(err) {
		return "none"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return cm.Data["revision"]
}

func (e *env) createAnnotated(name string, spec map[string]any, ann map[string]string) *unstructured.Unstructured {
	e.t.Helper()
	u := tu.NewCR(gadgetGVK, e.ns, name, spec)
	u.SetAnnotations(ann)
	if err := e.c.Create(context.Background(), u); err != nil {
		e.t.Fatal(err)
	}
	return u
}

// operator-sdk's per-resource Helm annotations reach Helm: hooks are
// skipped, descriptions recorded, force replaces objects, and a value that
// does not parse stalls the resource naming the annotation.
func TestHelmAnnotations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hooked := map[string]any{"postHook": true}

	// Install and upgrade hooks, with and without the disable-hooks annotations.
	e.createAnnotated("plain", hooked, nil)
	e.createAnnotated("nohooks", hooked, map[string]string{
		rel.AnnotationInstallDisableHooks: "true", rel.AnnotationInstallDescription: "installed by pipeline 42"})
	e.wait(gadgetGVK, "plain", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.wait(gadgetGVK, "nohooks", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if got := e.hookRevision("plain"); got != "1" {
		t.Errorf("without the annotation the post-install hook should run at revision 1; its ConfigMap says %s", got)
	}
	if got := e.hookRevision("nohooks"); got != "none" {
		t.Errorf("install-disable-hooks: the post-install hook ran (ConfigMap says revision %s)", got)
	}
	r := latest(t, e.ns, "nohooks")
	if r.Info.Description != "installed by pipeline 42" {
		t.Errorf("install-description: Helm recorded %q", r.Info.Description)
	}
	for _, h := range r.Hooks {
		if !h.LastRun.StartedAt.IsZero() {
			t.Errorf("install-disable-hooks: Helm records hook %s as run at %s", h.Name, h.LastRun.StartedAt)
		}
	}

	e.annotate(gadgetGVK, "plain", map[string]any{rel.AnnotationUpgradeDisableHooks: "true",
		rel.AnnotationUpgradeDescription: "upgraded by change 7"})
	e.patchSpec(gadgetGVK, "plain", map[string]any{"count": int64(2)})
	u := e.wait(gadgetGVK, "plain", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if u.GetGeneration() != 2 || nested(u, "status", "deployedRelease", "revision") != int64(2) {
		t.Fatalf("upgrade not done: %s", tu.Describe(u))
	}
	if got := e.hookRevision("plain"); got != "1" {
		t.Errorf("upgrade-disable-hooks: the post-upgrade hook ran (ConfigMap says revision %s)", got)
	}
	if d := latest(t, e.ns, "plain").Info.Description; d != "upgraded by change 7" {
		t.Errorf("upgrade-description: Helm recorded %q", d)
	}
	// Without it, the upgrade runs the hook: the check above can fail.
	e.annotate(gadgetGVK, "plain", map[string]any{rel.AnnotationUpgradeDisableHooks: "false"})
	e.patchSpec(gadgetGVK, "plain", map[string]any{"count": int64(3)})
	e.waitStatus(gadgetGVK, "plain", "revision 3", func(u *unstructured.Unstructured) bool {
		return nested(u, "status", "deployedRelease", "revision") == int64(3)
	})
	if got := e.hookRevision("plain"); got != "3" {
		t.Errorf("the post-upgrade hook did not run at revision 3; its ConfigMap says %s", got)
	}

	// upgrade-force replaces the objects: a label added by hand survives a
	// patching upgrade, not a forced one.
	e.create(gadgetGVK, "forced", map[string]any{})
	e.wait(gadgetGVK, "forced", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	byHand := func() string {
		cm := &corev1.ConfigMap{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "forced"}, cm); err != nil {
			t.Fatal(err)
		}
		return cm.Labels["by-hand"]
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "forced", Namespace: e.ns}}
	if err := e.c.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"by-hand":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	upgradeTo := func(rev int64) {
		t.Helper()
		e.patchSpec(gadgetGVK, "forced", map[string]any{"count": rev})
		e.waitStatus(gadgetGVK, "forced", "the upgrade", func(u *unstructured.Unstructured) bool {
			return nested(u, "status", "deployedRelease", "revision") == rev
		})
	}
	upgradeTo(2)
	if byHand() != "yes" {
		t.Fatalf("a patching upgrade removed the label added by hand: the force check below proves nothing")
	}
	e.annotate(gadgetGVK, "forced", map[string]any{rel.AnnotationUpgradeForce: "true"})
	upgradeTo(3)
	if v := byHand(); v != "" {
		t.Errorf("upgrade-force: the ConfigMap was patched, not replaced (label by-hand=%q kept)", v)
	}

	// A value that does not parse stalls the resource, naming it; nothing is installed.
	e.createAnnotated("bad", map[string]any{}, map[string]string{rel.AnnotationUpgradeForce: "yes please"})
	u = e.wait(gadgetGVK, "bad", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
	expect(t, u, "Ready=False/InvalidAnnotation", "Reconciling=False/Stalled", "Irreconcilable=True/InvalidAnnotation")
	msg := conditionMessage(u, status.TypeStalled)
	if !strings.Contains(msg, rel.AnnotationUpgradeForce) || !strings.Contains(msg, `"yes please"`) {
		t.Errorf("Stalled message %q does not name the annotation and its value", msg)
	}
	if h := history(t, e.ns, "bad"); len(h) != 0 {
		t.Errorf("a resource with a bad annotation was installed: %d revisions", len(h))
	}
	e.annotate(gadgetGVK, "bad", map[string]any{rel.AnnotationUpgradeForce: "false"})
	e.wait(gadgetGVK, "bad", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	// On a deployed resource too, pause included.
	e.annotate(gadgetGVK, "bad", map[string]any{rel.AnnotationPaused: "yes"})
	u = e.wait(gadgetGVK, "bad", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
	expect(t, u, "Deployed=True/InstallSuccessful")
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, rel.AnnotationPaused) || !strings.Contains(msg, `"yes"`) {
		t.Errorf("Stalled message %q", msg)
	}

	// uninstall-disable-hooks: a pre-delete hook that the API server denies
	// does not block the uninstall (TestUninstallFailureKeepsTheFinalizer
	// shows that it does without the annotation).
	cr := e.createAnnotated("deleted", map[string]any{"preDeleteHook": true}, map[string]string{
		rel.AnnotationUninstallDisableHooks: "true", rel.AnnotationUninstallDescription: "removed by pipeline 42"})
	e.wait(gadgetGVK, "deleted", status.TypeReady, metav1.ConditionTrue, "")
	e.policy("no-hooks", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "!has(object.metadata.labels) || !('helmapp.io/test-hook' in object.metadata.labels)",
			Message: "hook configmaps are not allowed"})
	e.waitDenied("hook ConfigMaps", func(ctx context.Context) error {
		return e.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns,
			Labels: map[string]string{"helmapp.io/test-hook": "x"}}}, client.DryRunAll)
	})
	if err := e.c.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource to be uninstalled without its hook", func() (bool, string) {
		_, err := tu.Get(t, e.c, gadgetGVK, e.ns, "deleted")
		return apierrors.IsNotFound(err), "still there"
	})
	for _, ev := range e.events(cr) {
		if ev.Reason == "UninstallFailed" {
			t.Errorf("the uninstall failed on its way: %s", ev.Message)
		}
	}
}
