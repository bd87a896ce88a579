package release

import (
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
)

func scopeMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}, meta.RESTScopeNamespace)
	return m
}

// TestScopeStrays is the one check of a release's scope over the objects of
// a manifest: what it lets through and what it names.
func TestScopeStrays(t *testing.T) {
	clusterRoles := Scope{ClusterScoped: []ScopeRule{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Names: []string{"{{release}}-*"}}}}
	monitors := Scope{Namespaced: []ScopeRule{{Group: "monitoring.coreos.com", Kind: "ServiceMonitor",
		Namespaces: []string{"monitoring"}, Names: []string{"{{namespace}}-{{release}}"}}}}
	tests := []struct {
		name     string
		scope    Scope
		manifest string
		want     []string // the strays, as ScopedObject.String says
	}{{
		name:     "namespaced objects of the release namespace, named or not",
		manifest: "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: team-a}\n",
	}, {
		name:     "a namespaced object elsewhere, named with its template",
		manifest: "---\n# Source: c/templates/ingress.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# Source: c/templates/ingress.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: kube-system\n",
		want:     []string{"ConfigMap kube-system/injected (from c/templates/ingress.yaml)"},
	}, {
		name:     "a cluster-scoped object without a scope",
		manifest: "# Source: c/templates/x.yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwn}\n",
		want:     []string{"ClusterRoleBinding pwn (cluster-scoped, from c/templates/x.yaml)"},
	}, {
		name:     "a cluster-scoped object that names a namespace is still cluster-scoped",
		manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: evil, namespace: team-a}\n",
		want:     []string{"Namespace evil (cluster-scoped)"},
	}, {
		name:     "a ClusterRole whose name the scope's pattern allows",
		scope:    clusterRoles,
		manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: web-reader}\n",
	}, {
		name:     "a ClusterRole of another name",
		scope:    clusterRoles,
		manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: cluster-admin}\n",
		want:     []string{"ClusterRole cluster-admin (cluster-scoped)"},
	}, {
		name:     "another cluster-scoped kind than the scope's",
		scope:    clusterRoles,
		manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: web-reader}\n",
		want:     []string{"ClusterRoleBinding web-reader (cluster-scoped)"},
	}, {
		name:     "a cluster-scoped rule allows nothing namespaced elsewhere",
		scope:    clusterRoles,
		manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-x, namespace: team-b}\n",
		want:     []string{"ConfigMap team-b/web-x"},
	}, {
		name:     "a namespaced kind in a namespace the scope lists",
		scope:    monitors,
		manifest: "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: team-a-web, namespace: monitoring}\n",
	}, {
		name:     "a namespaced kind in a namespace the scope does not list",
		scope:    monitors,
		manifest: "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: team-a-web, namespace: kube-system}\n",
		want:     []string{"ServiceMonitor kube-system/team-a-web"},
	}, {
		name:     "the items of a List, each judged",
		manifest: "# Source: c/templates/list.yaml\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: in}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: out, namespace: team-b}}\n- {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: web-x}}\n",
		want:     []string{"ConfigMap team-b/out (from c/templates/list.yaml)", "ClusterRole web-x (cluster-scoped, from c/templates/list.yaml)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := ManifestObjects(tt.manifest, "team-a", scopeMapper())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range tt.scope.Strays(objs, "web", "team-a") {
				got = append(got, o.String())
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("strays %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMatchName(t *testing.T) {
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{"{{release}}-*", "web-reader", true},
		{"{{release}}-*", "web-", true},
		{"{{release}}-*", "web", false},
		{"{{release}}-*", "webby-reader", false},
		{"{{release}}-*", "cluster-admin", false},
		{"*", "anything", true},
		{"{{namespace}}-{{release}}", "team-a-web", true},
		{"{{namespace}}-{{release}}", "team-a-web2", false},
		{"*-{{release}}-*", "x-web-y", true},
		{"*-{{release}}-*", "x-web", false},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"fixed", "fixed", true},
	} {
		if got := MatchName(tt.pattern, tt.name, "web", "team-a"); got != tt.want {
			t.Errorf("MatchName(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestRecordsInScopeChecksHooks: a record read back from storage is judged
// whole, its hooks (which Helm runs on uninstall and rollback) included,
// and the failure names the record Secret and the hook's template.
func TestRecordsInScopeChecksHooks(t *testing.T) {
	r := &Runner{Shared: &Shared{Services: &Services{}}, Name: "web", Namespace: "team-a"}
	rel := &helmrelease.Release{Name: "web", Namespace: "team-a", Version: 3,
		Manifest: "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
		Hooks: []*helmrelease.Hook{{Path: "c/templates/hook.yaml",
			Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: pwn, namespace: kube-system, annotations: {helm.sh/hook: pre-delete}}\n"}}}
	if err := r.RecordsInScope(State{Latest: &helmrelease.Release{Name: "web", Version: 3, Manifest: rel.Manifest}}); err != nil {
		t.Fatalf("an in-scope record: %v", err)
	}
	err := r.RecordsInScope(State{Latest: rel, Deployed: rel})
	f := AsFailure(err)
	if f == nil || f.Reason != status.ReasonOutOfScope || f.StalledReason != status.ReasonOutOfScope {
		t.Fatalf("failure %+v, want OutOfScope, stalled", f)
	}
	for _, want := range []string{"Secret sh.helm.release.v1.web.v3", "Pod kube-system/pwn (from c/templates/hook.yaml)",
		"outside the release namespace team-a", "does not match what the operator wrote"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("message %q does not say %q", f.Message, want)
		}
	}
	// A forged record may say another namespace: objects that name none
	// are where Helm applies them, the release's.
	forged := &helmrelease.Release{Name: "web", Namespace: "kube-system", Version: 4,
		Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}
	if err := r.RecordsInScope(State{Latest: forged}); err != nil {
		t.Errorf("a record naming another namespace, whose objects name none: %v", err)
	}
}

// TestRenderedOutOfScopeMessage: one line naming every object and its
// template, and saying nothing was applied.
func TestRenderedOutOfScopeMessage(t *testing.T) {
	e := RenderedOutOfScope(status.ActionInstall, "web", "team-a", []ScopedObject{
		{ObjectRef: objRef("v1", "ConfigMap", "kube-system", "injected"), Source: "nginx/templates/ingress.yaml"},
	})
	want := "The install of release web was refused: ConfigMap kube-system/injected (from nginx/templates/ingress.yaml) is outside the release namespace team-a; the watch's scope does not allow it; nothing was applied"
	if got := e.Failure().Message; got != want {
		t.Errorf("message\n%q, want\n%q", got, want)
	}
	if f := e.Failure(); f.Action != status.ActionInstall || !f.Refused || f.StalledReason != status.ReasonOutOfScope {
		t.Errorf("failure %+v", f)
	}
}

func objRef(apiVersion, kind, ns, name string) readiness.ObjectRef {
	return readiness.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
}
