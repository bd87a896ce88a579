package operator_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestPostRendererRefusesObjectsOutOfScope: the post-renderer of every
// install and upgrade refuses a manifest with an object outside the
// release's scope — a namespaced object elsewhere, a cluster-scoped object
// the watch's scope does not list — naming each and its template, and lets
// through what the scope allows.
func TestPostRendererRefusesObjectsOutOfScope(t *testing.T) {
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "scope-pr")
	owner, rm, ac := scopeOwner(t, ns)
	manifest := "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: x\n" +
		"---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: kube-system\n" +
		"---\n# Source: c/templates/svc.yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwn\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
	pr := operator.NewScopedPostRenderer(rm, ac.KubeClient, owner, nil, release.Scope{})
	_, err := pr.Run(bytes.NewBufferString(manifest))
	var strays *release.StraysError
	if !errors.As(err, &strays) {
		t.Fatalf("the post-renderer said %v, want a refusal of the objects out of scope", err)
	}
	for _, want := range []string{"ConfigMap kube-system/injected (from c/templates/cm.yaml)",
		"ClusterRoleBinding pwn (cluster-scoped, from c/templates/svc.yaml)", "outside the release namespace " + ns} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ConfigMap "+ns+"/web") {
		t.Errorf("refusal %q names an object in scope", err)
	}

	// A scope that allows ClusterRoles named after the release.
	scope := release.Scope{ClusterScoped: []release.ScopeRule{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Names: []string{release.NameRelease + "-*"}}}}
	pr = operator.NewScopedPostRenderer(rm, ac.KubeClient, owner, nil, scope)
	role := func(name string) string {
		return "---\n# Source: c/templates/role.yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + name + "\nrules: []\n"
	}
	if out, err := pr.Run(bytes.NewBufferString(role(owner.GetName() + "-reader"))); err != nil || !strings.Contains(out.String(), "name: "+owner.GetName()+"-reader") {
		t.Errorf("a ClusterRole the scope allows: %v\n%s", err, out)
	}
	if _, err := pr.Run(bytes.NewBufferString(role("cluster-admin-2"))); !errors.As(err, &strays) || !strings.Contains(err.Error(), "ClusterRole cluster-admin-2 (cluster-scoped, from c/templates/role.yaml)") {
		t.Errorf("a ClusterRole the scope does not allow: %v", err)
	}
}

// TestInstallRefusedByThePostRendererStoresNothing: Helm 3 runs the
// post-renderer before it stores the pending revision, so an install whose
// manifest the post-renderer refuses leaves Helm's history as it was and
// applies nothing — the injected ConfigMap included.
func TestInstallRefusedByThePostRendererStoresNothing(t *testing.T) {
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "scope-inst")
	other := tu.Namespace(t, c, "scope-other")
	owner, rm, ac := scopeOwner(t, ns)
	ch, err := loader.Load(filepath.Join(tu.RepoRoot(), "internal", "reconciler", "testdata", "charts", "unquoted"))
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(ac)
	install.ReleaseName, install.Namespace = owner.GetName(), ns
	install.PostRenderer = operator.NewScopedPostRenderer(rm, ac.KubeClient, owner, nil, release.Scope{})
	vals := map[string]any{"label": "x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: " + other}
	_, err = install.RunWithContext(context.Background(), ch, vals)
	var strays *release.StraysError
	if !errors.As(err, &strays) || !strings.Contains(err.Error(), "ConfigMap "+other+"/injected (from unquoted/templates/configmap.yaml)") {
		t.Fatalf("the install said %v, want the post-renderer's refusal naming the injected ConfigMap", err)
	}
	if h, err := ac.Releases.History(owner.GetName()); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Helm's history after the refusal: %d revisions, %v; want none", len(h), err)
	}
	for _, key := range []client.ObjectKey{{Namespace: other, Name: "injected"}, {Namespace: ns, Name: owner.GetName()}} {
		if err := c.Get(context.Background(), key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s: %v, want not found: nothing is applied", key, err)
		}
	}
}

// scopeOwner is an Echo resource of ns and the REST mapper and Helm action
// configuration of its releases.
func scopeOwner(t *testing.T, ns string) (*unstructured.Unstructured, meta.RESTMapper, *action.Configuration) {
	t.Helper()
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(tu.EchoGVK)
	owner.SetNamespace(ns)
	owner.SetName("web")
	owner.SetUID(types.UID("0d6b5f0e-3f5c-4c59-9f7a-1f2e3d4c5b6a"))
	ac, err := actionConfigGetter(t).ActionConfigFor(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := ac.RESTClientGetter.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	return owner, rm, ac
}
