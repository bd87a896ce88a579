package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A re-apply restores what was changed or deleted by hand and names it in a
// DriftCorrected event; a re-apply with no drift writes no object and emits
// nothing. Dependent watches are off, so that only the test's poke runs the
// re-apply, after both changes.
func TestDriftIsCorrectedAndNamed(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "watchDependentResources: false"))
	ctx := context.Background()
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	// Without dependent watches readiness is judged again only every
	// reconcilePeriod: being deployed is enough here.
	e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	key := client.ObjectKey{Namespace: e.ns, Name: "web"}

	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`))); err != nil {
		t.Fatal(err)
	}
	e.poke(tu.NginxGVK, "web")
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	for _, want := range []string{"Restored 2 objects of release web", "ConfigMap web (deleted)", "Deployment web (changed)"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("DriftCorrected event %q does not say %q", ev.Message, want)
		}
	}
	if err := e.c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the deleted ConfigMap was not re-created: %v", err)
	}
	dep := &appsv1.Deployment{}
	if err := e.c.Get(ctx, key, dep); err != nil || *dep.Spec.Replicas != 2 {
		t.Errorf("the Deployment's replicas were not restored: %v %v", dep.Spec.Replicas, err)
	}
	if e.objectWrites.Load() < 2 {
		t.Fatalf("%d object writes counted for two corrections: the count proves nothing", e.objectWrites.Load())
	}

	// No drift: nothing written, nothing said.
	time.Sleep(time.Second)
	rvs := map[string]string{}
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := e.c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		rvs[typeName(o)] = o.GetResourceVersion()
	}
	writes, gets := e.objectWrites.Load(), e.gets.Load()
	for i := 0; i < 2; i++ {
		e.poke(tu.NginxGVK, "web")
		want := gets + int64(i+1)
		tu.Eventually(t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
			return e.gets.Load() >= want, "no reconcile yet"
		})
	}
	time.Sleep(time.Second)
	if n := e.objectWrites.Load() - writes; n != 0 {
		t.Errorf("%d object writes by re-applies that found no drift", n)
	}
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := e.c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		if rvs[typeName(o)] != o.GetResourceVersion() {
			t.Errorf("%s web was written by a re-apply with no drift", typeName(o))
		}
	}
	n := 0
	for _, ev := range e.events(cr) {
		if ev.Reason == reconciler.EventDriftCorrected {
			n += int(max(ev.Count, 1))
		}
	}
	if n != 1 {
		t.Errorf("%d DriftCorrected events, want the one of the correction", n)
	}
}

func typeName(o client.Object) string {
	switch o.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Service:
		return "Service"
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	}
	return "?"
}

// TestNullFieldsOfTheManifestAreNotDrift (issue 39): a chart that writes
// `annotations:` with nothing under it (null), as sealed-secrets does on its
// Roles, RoleBindings and Deployment. A re-apply that restores a deleted
// object of the release leaves that one alone: not named as drift, and
// Helm's ownership annotations, which the API server keeps beside the
// manifest's nothing, still on it. Before, the re-apply patched its
// annotations to null, named it "(changed)" and deleted Helm's annotations,
// after which later re-applies skipped it as someone else's.
func TestNullFieldsOfTheManifestAreNotDrift(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, ", watchDependentResources: false"))
	ctx := context.Background()
	name := "nulls"
	cr := e.create(gadgetGVK, name, map[string]any{"label": injecting("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "-empty\n  annotations:\ndata:\n  a: b\n")})
	e.wait(gadgetGVK, name, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	e.poke(gadgetGVK, name)
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	if !strings.Contains(ev.Message, "Restored 1 objects") || strings.Contains(ev.Message, name+"-empty") {
		t.Errorf("DriftCorrected event %q: want only ConfigMap %s restored", ev.Message, name)
	}
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name + "-empty"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Annotations["meta.helm.sh/release-name"] != name {
		t.Errorf("ConfigMap %s-empty lost Helm's ownership annotations: %v", name, cm.Annotations)
	}
}
