package reconciler_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

const (
	collectedMessage = "The resource is managed by this operator; its objects and release records are garbage-collected with it when it is deleted"
	uninstallMessage = "The resource is managed by this operator; its release is uninstalled when it is deleted ("
)

// hasFinalizer tells whether u carries the operator's finalizer.
func hasFinalizer(u *unstructured.Unstructured) bool {
	return slices.Contains(u.GetFinalizers(), reconciler.Finalizer)
}

// waitFinalizer waits until the resource has (want) or has not the
// finalizer, with its Initialized message starting with msg.
func (e *env) waitFinalizer(name string, want bool, msg string) *unstructured.Unstructured {
	e.t.Helper()
	var u *unstructured.Unstructured
	tu.Eventually(e.t, time.Minute, "the finalizer and the Initialized message of "+name, func() (bool, string) {
		var err error
		if u, err = tu.Get(e.t, e.c, gadgetGVK, e.ns, name); err != nil {
			return false, err.Error()
		}
		got := conditionMessage(u, status.TypeInitialized)
		return hasFinalizer(u) == want && strings.HasPrefix(got, msg), "finalizers " + strings.Join(u.GetFinalizers(), ",") + "; Initialized: " + got
	})
	return u
}

// assertAllOwned checks that every object of the release's deployed
// revision and every record of its history carries u's owner reference:
// the garbage collector deletes them all with u.
func (e *env) assertAllOwned(u *unstructured.Unstructured) {
	e.t.Helper()
	ctx := context.Background()
	hist := history(e.t, e.ns, u.GetName())
	if len(hist) == 0 {
		e.t.Fatalf("release %s has no history", u.GetName())
	}
	owned := func(refs []metav1.OwnerReference) bool {
		return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == u.GetUID() })
	}
	latest := hist[len(hist)-1]
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: u.GetName()}, cm); err != nil {
		e.t.Fatalf("ConfigMap of release %s: %v", latest.Name, err)
	}
	if !owned(cm.OwnerReferences) {
		e.t.Errorf("ConfigMap %s is not owned by %s: %v", cm.Name, u.GetName(), cm.OwnerReferences)
	}
	secrets := &corev1.SecretList{}
	if err := e.c.List(ctx, secrets, client.InNamespace(e.ns), client.MatchingLabelsSelector{Selector: release.RecordsOf(u.GetName())}); err != nil {
		e.t.Fatal(err)
	}
	if len(secrets.Items) != len(hist) {
		e.t.Errorf("%d record Secrets for %d revisions", len(secrets.Items), len(hist))
	}
	for _, s := range secrets.Items {
		if !owned(s.OwnerReferences) {
			e.t.Errorf("record %s is not owned by %s: %v", s.Name, u.GetName(), s.OwnerReferences)
		}
	}
}

// TestFinalizerOnlyWhereTheCollectorCannotUninstall (issue 41): a release
// whose every object and record the resource owns, and whose chart has no
// delete hook, gets no finalizer: its Initialized condition says the
// garbage collector deletes it all with the resource, and a deletion of the
// resource is not held by an operator that may be gone (OLM's uninstall).
// A pre-delete hook, helmapp.io/uninstall-on-delete "false", or an earlier
// version's finalizer on a release that does not need it: the first two
// keep it and say why, the last loses it.
func TestFinalizerOnlyWhereTheCollectorCannotUninstall(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	e.create(gadgetGVK, "plain", map[string]any{"count": 1})
	e.wait(gadgetGVK, "plain", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	plain := e.waitFinalizer("plain", false, collectedMessage)
	e.assertAllOwned(plain)

	e.create(gadgetGVK, "hooked", map[string]any{"count": 1, "preDeleteHook": true})
	e.wait(gadgetGVK, "hooked", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.waitFinalizer("hooked", true, uninstallMessage+"its chart has a pre-delete hook (ConfigMap hooked-pre-delete)")

	kept := tu.NewCR(gadgetGVK, e.ns, "kept", map[string]any{"count": 1})
	kept.SetAnnotations(map[string]string{reconciler.AnnotationUninstallOnDelete: "false"})
	if err := e.c.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	e.wait(gadgetGVK, "kept", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.waitFinalizer("kept", true, uninstallMessage+`it keeps its release on deletion (helmapp.io/uninstall-on-delete: "false")`)

	// As a resource of an earlier version, which put the finalizer on
	// every resource: it comes off once the release is known not to need it.
	older := tu.NewCR(gadgetGVK, e.ns, "older", map[string]any{"count": 1})
	older.SetFinalizers([]string{reconciler.Finalizer})
	if err := e.c.Create(ctx, older); err != nil {
		t.Fatal(err)
	}
	e.wait(gadgetGVK, "older", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.assertAllOwned(e.waitFinalizer("older", false, collectedMessage))

	// Deleted, a resource without the finalizer goes at once; the
	// garbage collector (which envtest does not run) deletes what it owns.
	if err := e.c.Delete(ctx, plain); err != nil {
		t.Fatal(err)
	}
	e.waitGone(gadgetGVK, "plain")
}

// TestFinalizerAddedBeforeAClusterObjectAndRemovedAfter (issue 41): a
// resource without the finalizer whose upgrade adds a ClusterRole (which
// cannot carry the resource's owner reference) gets the finalizer before
// Helm creates the ClusterRole, so that a deletion at any time after
// uninstalls it; once an upgrade drops the ClusterRole, the finalizer goes.
func TestFinalizerAddedBeforeAClusterObjectAndRemovedAfter(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, `, scope: {clusterScoped: [{group: rbac.authorization.k8s.io, kind: ClusterRole, names: ["{{release}}-*"]}]}`))
	ctx := context.Background()
	// ClusterRoles are the cluster's: the resource is named after the
	// test's namespace, and the scope lets its release have "<name>-*".
	name := e.ns
	role := name + "-reader"
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}})
	})

	e.create(gadgetGVK, name, map[string]any{"label": "plain"})
	e.wait(gadgetGVK, name, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.waitFinalizer(name, false, collectedMessage)

	// Watch the resource from here on, to see at which resourceVersion the
	// finalizer appears: one etcd orders the writes of every kind.
	u, _ := tu.Get(t, e.c, gadgetGVK, e.ns, name)
	wc, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gadgetGVK.GroupVersion().WithKind("GadgetList"))
	w, err := wc.Watch(ctx, list, client.InNamespace(e.ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: u.GetResourceVersion(),
		FieldSelector: "metadata.name=" + name}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	e.patchSpec(gadgetGVK, name, map[string]any{"label": injecting("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + role + "\nrules: []\n")})
	e.wait(gadgetGVK, name, status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	e.waitFinalizer(name, true, uninstallMessage+"it has cluster-scoped objects (ClusterRole "+role+")")
	cr := &rbacv1.ClusterRole{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
		t.Fatalf("ClusterRole of the upgrade: %v", err)
	}
	var finalizedAt string
	for finalizedAt == "" {
		select {
		case ev := <-w.ResultChan():
			if o, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type == watch.Modified && hasFinalizer(o) {
				finalizedAt = o.GetResourceVersion()
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event of the resource with the finalizer")
		}
	}
	// The ClusterRole was never changed after its creation: its
	// resourceVersion is its creation's.
	if c, err := resourceversion.CompareResourceVersion(finalizedAt, cr.ResourceVersion); err != nil || c >= 0 {
		t.Errorf("the finalizer was added at resourceVersion %s, the ClusterRole created at %s: want the finalizer first (%v)", finalizedAt, cr.ResourceVersion, err)
	}

	e.patchSpec(gadgetGVK, name, map[string]any{"label": "plain"})
	tu.Eventually(t, time.Minute, "the ClusterRole to be deleted by the upgrade", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})
		return client.IgnoreNotFound(err) == nil && err != nil, ""
	})
	e.assertAllOwned(e.waitFinalizer(name, false, collectedMessage))
}
