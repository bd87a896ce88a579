package reconciler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// The release scope's tests run the operator as it runs by default: as
// itself, with rights in every namespace (no lockdown, no ServiceAccount per
// release), over a chart that interpolates values unquoted
// (testdata/charts/unquoted). The tenant may only create and read Gadgets in
// its namespace, with the `edit` role there.

// scopeWatches maps Gadget to the unquoted chart, with the watch fields
// given (e.g. a scope).
func scopeWatches(t *testing.T, fields string) string {
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "unquoted"))
	if err != nil {
		t.Fatal(err)
	}
	return tu.WatchesFile(t, "- {group: test.helmapp.io, version: v1, kind: Gadget, chart: "+chart+fields+"}\n")
}

// tenant is a client acting as the ServiceAccount "tenant" of the env's
// namespace, which may create and read Gadgets there and holds the
// ClusterRole edit there, and nothing else.
func (e *env) tenant() client.Client {
	e.t.Helper()
	tu.ServiceAccount(e.t, e.c, e.ns, "tenant", []rbacv1.PolicyRule{{APIGroups: []string{"test.helmapp.io"},
		Resources: []string{"gadgets"}, Verbs: []string{"create", "get", "list", "watch"}}}, e.ns)
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: e.ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "tenant"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}}
	if err := e.c.Create(context.Background(), rb); err != nil {
		e.t.Fatal(err)
	}
	as := tu.Impersonating(cfg, e.ns, "tenant")
	tu.WaitUntilAllowed(e.t, as, "create", "test.helmapp.io", "gadgets", e.ns, true)
	tu.WaitUntilAllowed(e.t, as, "update", "", "secrets", e.ns, true)
	return tu.Client(e.t, as)
}

// injecting is a value that closes the unquoted field and adds a document.
func injecting(doc string) string { return "x\n---\n" + doc }

// TestScopeRefusesInjectedObjects: a tenant who may only create Gadgets
// (and edit) in namespace A injects, through unquoted values of the chart,
// a ConfigMap into namespace B, a ClusterRoleBinding to cluster-admin and a
// hook Pod into B. Nothing is created outside A, Helm's history gets no
// revision, and each resource is Stalled OutOfScope naming the object and
// its template, with a Warning event; removing the injection from the spec
// recovers.
func TestScopeRefusesInjectedObjects(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, ""))
	tenant := e.tenant()
	b := tu.Namespace(t, e.c, "scope-b")
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "tenant"), "create", "", "configmaps", b, false)
	binding := e.ns + "-pwn"
	cases := []struct {
		name  string
		spec  map[string]any
		names string // what the status names
	}{
		{"cm", map[string]any{"label": injecting("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: " + b + "\n")},
			"ConfigMap " + b + "/injected (from unquoted/templates/configmap.yaml)"},
		{"crb", map[string]any{"label": injecting("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + binding +
			"\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" +
			"subjects: [{kind: ServiceAccount, name: tenant, namespace: " + e.ns + "}]\n")},
			"ClusterRoleBinding " + binding + " (cluster-scoped, from unquoted/templates/configmap.yaml)"},
		{"hook", map[string]any{"hook": true, "note": injecting("apiVersion: v1\nkind: Pod\nmetadata:\n  name: pwn\n  namespace: " + b +
			"\n  annotations: {helm.sh/hook: pre-install}\nspec: {containers: [{name: c, image: busybox}]}\n")},
			"Pod " + b + "/pwn (from unquoted/templates/hook.yaml)"},
	}
	for _, c := range cases {
		if err := tenant.Create(context.Background(), tu.NewCR(gadgetGVK, e.ns, c.name, c.spec)); err != nil {
			t.Fatalf("the tenant creating Gadget %s: %v", c.name, err)
		}
	}
	for _, c := range cases {
		u := e.wait(gadgetGVK, c.name, status.TypeStalled, metav1.ConditionTrue, status.ReasonOutOfScope)
		expect(t, u, "Ready=False/OutOfScope", "Reconciling=False/Stalled")
		want := fmt.Sprintf("The install of release %s was refused: %s is outside the release namespace %s; the watch's scope does not allow it; nothing was applied",
			c.name, c.names, e.ns)
		if msg := conditionMessage(u, status.TypeStalled); msg != want {
			t.Errorf("%s: Stalled message\n got %q\nwant %q", c.name, msg, want)
		}
		if ev := e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventOutOfScope); ev.Message != want {
			t.Errorf("%s: event message\n got %q\nwant %q", c.name, ev.Message, want)
		}
		if h := history(t, e.ns, c.name); len(h) != 0 {
			t.Errorf("%s: Helm's history has %d revisions, want none", c.name, len(h))
		}
	}
	nothingOutside := func() {
		t.Helper()
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Pod{}} {
			name := map[bool]string{true: "injected", false: "pwn"}[fmt.Sprintf("%T", obj) == "*v1.ConfigMap"]
			if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: b, Name: name}, obj); !apierrors.IsNotFound(err) {
				t.Errorf("%T %s/%s: %v, want not found", obj, b, name, err)
			}
		}
		if err := e.c.Get(context.Background(), client.ObjectKey{Name: binding}, &rbacv1.ClusterRoleBinding{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRoleBinding %s: %v, want not found", binding, err)
		}
	}
	nothingOutside()

	// The spec without the injection installs as any other.
	e.patchSpec(gadgetGVK, "cm", map[string]any{"label": "plain"})
	u := e.wait(gadgetGVK, "cm", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	expect(t, u, "Stalled=False/NotStalled")
	if h := history(t, e.ns, "cm"); len(h) != 1 {
		t.Errorf("Helm's history has %d revisions after the fixed spec, want 1", len(h))
	}
	nothingOutside()
}

// TestScopeAllowsWhatTheWatchLists: a watch whose scope lets its releases
// create ClusterRoles named after the release installs one, and refuses a
// ClusterRole of another name.
func TestScopeAllowsWhatTheWatchLists(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, `, scope: {clusterScoped: [{group: rbac.authorization.k8s.io, kind: ClusterRole, names: ["{{release}}-*"]}]}`))
	tenant := e.tenant()
	role := func(name string) string {
		return injecting("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + name + "\nrules: []\n")
	}
	allowed, refused := e.ns+"-ok-reader", e.ns+"-other"
	for _, name := range []string{allowed, refused} {
		t.Cleanup(func() {
			_ = e.c.Delete(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})
		})
	}
	// The release named e.ns+"-ok" may create "<release>-reader"; the
	// release named "bad" may not create e.ns+"-other".
	okName := e.ns + "-ok"
	for name, label := range map[string]string{okName: role(allowed), "bad": role(refused)} {
		if err := tenant.Create(context.Background(), tu.NewCR(gadgetGVK, e.ns, name, map[string]any{"label": label})); err != nil {
			t.Fatalf("the tenant creating Gadget %s: %v", name, err)
		}
	}
	e.wait(gadgetGVK, okName, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: allowed}, &rbacv1.ClusterRole{}); err != nil {
		t.Errorf("the ClusterRole the scope allows: %v", err)
	}
	u := e.wait(gadgetGVK, "bad", status.TypeStalled, metav1.ConditionTrue, status.ReasonOutOfScope)
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, "ClusterRole "+refused+" (cluster-scoped, from unquoted/templates/configmap.yaml)") {
		t.Errorf("Stalled message %q does not name the ClusterRole", msg)
	}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: refused}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRole the scope does not allow: %v, want not found", err)
	}
}

// TestScopeRecordReadBack: a tenant with `edit` rewrites the deployed
// record (same revision, labels kept) to list a ConfigMap of namespace B.
// A re-apply and the resource's deletion neither read, patch nor delete it;
// the resource is Stalled OutOfScope naming the record Secret and the
// object; once the record is restored, the deletion uninstalls the release
// and still leaves the ConfigMap of B alone.
func TestScopeRecordReadBack(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, ", reconcilePeriod: 1s"))
	tenant := e.tenant()
	b := tu.Namespace(t, e.c, "scope-b")
	victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: b}, Data: map[string]string{"a": "original"}}
	if err := e.c.Create(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	// Any read of B's objects by the operator's uncached reader fails the test.
	touched := func(obj client.Object) error {
		if obj.GetNamespace() == b {
			t.Errorf("the operator read %T %s/%s", obj, b, obj.GetName())
		}
		return nil
	}
	e.readFault.Store(&touched)
	if err := tenant.Create(context.Background(), tu.NewCR(gadgetGVK, e.ns, "web", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	e.wait(gadgetGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	// The tenant writes a revision 2 with Helm's own encoding, as `helm
	// upgrade` would (revision 1 superseded): a revision the operator does
	// not vouch for (a record rewritten in place is ReleaseRecordInvalid,
	// TestRewrittenRecordIsNotActedOn), which only the scope guards.
	cs, err := kubernetes.NewForConfig(tu.Impersonating(cfg, e.ns, "tenant"))
	if err != nil {
		t.Fatal(err)
	}
	records := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(e.ns)))
	first, err := records.Get("web", 1)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := records.Get("web", 1)
	if err != nil {
		t.Fatal(err)
	}
	forged.Version = 2
	forged.Manifest += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: victim\n  namespace: " + b + "\ndata:\n  a: patched\n"
	first.Info.Status = helmrelease.StatusSuperseded
	if err := records.Update(first); err != nil {
		t.Fatalf("the tenant superseding revision 1: %v", err)
	}
	if err := records.Create(forged); err != nil {
		t.Fatalf("the tenant writing revision 2: %v", err)
	}

	// The new record wakes the resource, and so does the periodic re-apply.
	u := e.wait(gadgetGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonOutOfScope)
	msg := conditionMessage(u, status.TypeStalled)
	for _, want := range []string{"The record of release web revision 2 (Secret sh.helm.release.v1.web.v2)", "ConfigMap " + b + "/victim",
		"the record does not match what the operator wrote"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Stalled message %q does not say %q", msg, want)
		}
	}
	expect(t, u, "Ready=False/OutOfScope", "Irreconcilable=True/OutOfScope")
	e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventOutOfScope)
	e.poke(gadgetGVK, "web")
	time.Sleep(3 * time.Second) // periodic re-applies and the poke's reconcile: none may touch B
	unchanged := func(when string) {
		t.Helper()
		got := &corev1.ConfigMap{}
		if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(victim), got); err != nil {
			t.Fatalf("%s: the ConfigMap of B: %v", when, err)
		}
		if got.ResourceVersion != victim.ResourceVersion || got.Data["a"] != "original" {
			t.Errorf("%s: the ConfigMap of B was written: %v", when, got.Data)
		}
	}
	unchanged("after the re-applies")

	// Deleting the resource uninstalls nothing while the record is forged.
	if err := e.c.Delete(context.Background(), tu.NewCR(gadgetGVK, e.ns, "web", nil)); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the deletion to be held", func() (bool, string) {
		m := conditionMessage(e.get(gadgetGVK, "web"), status.TypeStalled)
		return strings.Contains(m, "the release is not uninstalled, and the finalizer stays until then"), m
	})
	unchanged("after the deletion was held")

	// The forged revision deleted and revision 1 deployed again, the
	// deletion goes through; B is still untouched.
	if err := cs.CoreV1().Secrets(e.ns).Delete(context.Background(), "sh.helm.release.v1.web.v2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	first.Info.Status = helmrelease.StatusDeployed
	if err := records.Update(first); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource to be gone", func() (bool, string) {
		_, err := tu.Get(t, e.c, gadgetGVK, e.ns, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	unchanged("after the uninstall")
}
