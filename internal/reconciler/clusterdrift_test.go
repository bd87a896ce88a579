package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestDeletedClusterScopedObjectWakesItsResource (issue 39): a release's
// cluster-scoped object (a ClusterRole the watch's scope allows) deleted by
// hand is restored at once, as a namespaced one is: its deletion reconciles
// the resource through the owner annotations the operator wrote on it (a
// cluster-scoped object cannot carry an owner reference to a namespaced
// resource). The watch's reconcilePeriod is an hour, so no periodic
// reconcile does it instead; before, the real charts' ClusterRoles and
// webhook configurations came back only at the next period (59 s with the
// default), the status Ready=True meanwhile.
func TestDeletedClusterScopedObjectWakesItsResource(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, `, reconcilePeriod: 1h, scope: {clusterScoped: [{group: rbac.authorization.k8s.io, kind: ClusterRole, names: ["{{release}}-*"]}]}`))
	ctx := context.Background()
	name := e.ns + "-cr"
	role := name + "-reader"
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}})
	})
	u := e.create(gadgetGVK, name, map[string]any{"label": injecting("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + role + "\nrules: []\n")})
	e.wait(gadgetGVK, name, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	before := &rbacv1.ClusterRole{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: role}, before); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, before); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 2*time.Minute, "ClusterRole "+role+" restored", func() (bool, string) {
		now := &rbacv1.ClusterRole{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: role}, now); err != nil {
			return false, err.Error()
		}
		return now.UID != before.UID, "the old one"
	})
	ev := e.waitEvent(u, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	if !strings.Contains(ev.Message, role) {
		t.Errorf("DriftCorrected event %q does not name ClusterRole %s", ev.Message, role)
	}
}
