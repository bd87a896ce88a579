package reconciler_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestDeletionWithoutRecordsDeletesLeftoversOutsideTheNamespace (issue 39):
// a release whose scope lets it create a ClusterRole and a ConfigMap of
// another namespace loses its records before its resource's deletion is
// handled, as when its namespace is deleted (the namespace controller
// deletes the release Secrets at once; envtest has none, so the test
// deletes them, with the operator stopped). Helm has nothing to uninstall;
// the operator still deletes the ClusterRole and the other namespace's
// ConfigMap it marked as the resource's, and leaves alone a ClusterRole of
// the release that asks to be kept and a neighbour release's ClusterRole.
// Before, both stayed for good: real charts' ClusterRoles, bindings and
// webhook configurations outlived their namespace (gatekeeper's then
// refuses every namespace's creation).
func TestDeletionWithoutRecordsDeletesLeftoversOutsideTheNamespace(t *testing.T) {
	other := tu.Namespace(t, tu.Client(t, cfg), "leftovers-b")
	e := newEnvWatching(t, scopeWatches(t, `, scope: {clusterScoped: [{group: rbac.authorization.k8s.io, kind: ClusterRole, names: ["{{release}}-*"]}], `+
		`namespaces: [{group: "", kind: ConfigMap, namespaces: [`+other+`], names: ["{{release}}"]}]}`))
	ctx := context.Background()
	gone, neighbour := e.ns+"-gone", e.ns+"-nb"
	clusterRole := func(name, annotations string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + name + "\n" + annotations + "rules: []\n"
	}
	roles := []string{gone + "-reader", gone + "-kept", neighbour + "-reader"}
	for _, name := range roles {
		t.Cleanup(func() {
			_ = e.c.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
	docs := strings.Join([]string{
		clusterRole(gone+"-reader", ""),
		clusterRole(gone+"-kept", "  annotations:\n    helm.sh/resource-policy: keep\n"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + gone + "\n  namespace: " + other + "\n",
	}, "---\n")
	e.create(gadgetGVK, gone, map[string]any{"label": injecting(docs)})
	e.create(gadgetGVK, neighbour, map[string]any{"label": injecting(clusterRole(neighbour+"-reader", ""))})
	e.wait(gadgetGVK, gone, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.wait(gadgetGVK, neighbour, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	for _, name := range roles {
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); err != nil {
			t.Fatalf("ClusterRole %s after the install: %v", name, err)
		}
	}

	// The records go first, then the resource is deleted; the operator
	// sees both at once when it starts again.
	e.stopOp()
	if err := e.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(e.ns),
		client.MatchingLabelsSelector{Selector: release.RecordsOf(gone)}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, tu.NewCR(gadgetGVK, e.ns, gone, nil)); err != nil {
		t.Fatal(err)
	}
	e.stopOp = e.startOp()
	e.waitGone(gadgetGVK, gone)

	for _, name := range []string{gone + "-reader"} {
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole %s of the deleted resource's release: %v, want not found", name, err)
		}
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: other, Name: gone}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap %s/%s of the deleted resource's release: %v, want not found", other, gone, err)
	}
	for _, name := range []string{gone + "-kept", neighbour + "-reader"} {
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); err != nil {
			t.Errorf("ClusterRole %s (kept by its policy, or the neighbour's): %v, want it still there", name, err)
		}
	}
	e.wait(gadgetGVK, neighbour, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
}

// TestDeletionOfARefusedInstallIsNotHeldByTheSweep (issue 39): a resource
// whose install was refused before Helm stored anything (its ServiceAccount
// may not create the chart's ClusterRole: Ready=False PermissionDenied) is
// deleted while that ServiceAccount may not list ClusterRoles either. No
// release ever existed, so there is nothing outside the namespace to look
// for: the resource goes. Before, the leftover sweep ran as the
// ServiceAccount, failed to list ClusterRoles and held the finalizer with
// UninstallError until someone granted the right (found by the e2e test of
// the real charts under their generated RBAC with a rule removed).
func TestDeletionOfARefusedInstallIsNotHeldByTheSweep(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, `, scope: {clusterScoped: [{group: rbac.authorization.k8s.io, kind: ClusterRole, names: ["{{release}}-*"]}]}`), withServiceAccounts)
	e.tenant()
	name := "refused"
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-reader"}})
	})
	doc := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + name + "-reader\nrules: []\n"
	e.createAnnotated(name, map[string]any{"label": injecting(doc)}, map[string]string{release.AnnotationServiceAccount: "tenant"})
	e.wait(gadgetGVK, name, status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	if err := e.c.Delete(context.Background(), tu.NewCR(gadgetGVK, e.ns, name, nil)); err != nil {
		t.Fatal(err)
	}
	e.waitGone(gadgetGVK, name)
}
