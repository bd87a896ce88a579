package release

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// finalizerMapper serves ConfigMaps (namespaced) and ClusterRoles
// (cluster-scoped), nothing else.
func finalizerMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	return m
}

const ownedCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: ns
  ownerReferences:
  - {apiVersion: web.helmapp.io/v1alpha1, kind: Nginx, name: web, uid: uid-me, controller: true}
`

const annotatedRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: web-reader
  annotations:
    operator-sdk/primary-resource: ns/web
`

const keptCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
  namespace: ns
  annotations:
    helm.sh/resource-policy: " Keep"
    operator-sdk/primary-resource: ns/web
`

const cliCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: ns
`

func stored(manifest string, hooks ...*release.Hook) *release.Release {
	return &release.Release{Name: "web", Namespace: "ns", Version: 2, Manifest: manifest, Hooks: hooks,
		Info: &release.Info{Status: release.StatusDeployed}}
}

// record is a record Secret's metadata, owned by uid ("" for none).
func record(name string, uid types.UID) metav1.Object {
	m := &metav1.ObjectMeta{Name: name}
	if uid != "" {
		m.OwnerReferences = []metav1.OwnerReference{{Kind: "Nginx", Name: "web", UID: uid}}
	}
	return m
}

func obj(apiVersion, kind, ns, name string, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(ann)
	return u
}

// TestNeedsFinalizer holds the rule of finalizer.go: the finalizer only
// where the garbage collector cannot do the uninstall's job.
func TestNeedsFinalizer(t *testing.T) {
	hook := func(events ...release.HookEvent) *release.Hook {
		return &release.Hook{Name: "web-hook", Kind: "Job", Events: events}
	}
	base := func(f FinalizerFacts) FinalizerFacts {
		f.Owner, f.Namespace, f.Mapper = "uid-me", "ns", finalizerMapper()
		return f
	}
	tests := []struct {
		name    string
		facts   FinalizerFacts
		want    bool
		wantWhy string
	}{
		{"nothing stored, nothing planned", base(FinalizerFacts{}), false, ""},
		{"always", base(FinalizerFacts{Policy: FinalizerAlways}), true, "finalizer: always"},
		{"auto spelled out", base(FinalizerFacts{Policy: FinalizerAuto, Stored: []*release.Release{stored(ownedCM)}}), false, ""},
		{"keeps its release", base(FinalizerFacts{Keep: true}), true, `helmapp.io/uninstall-on-delete: "false"`},
		{"uninstallWait", base(FinalizerFacts{UninstallWait: true}), true, "uninstallWait"},
		{"paused", base(FinalizerFacts{Paused: true}), true, "it is paused"},
		{"every object and record owned", base(FinalizerFacts{Stored: []*release.Release{stored(ownedCM + "---\n" + keptCM)},
			Records: []metav1.Object{record("sh.helm.release.v1.web.v1", "uid-me"), record("sh.helm.release.v1.web.v2", "uid-me")}}), false, ""},
		{"a cluster-scoped object stored", base(FinalizerFacts{Stored: []*release.Release{stored(ownedCM + "---\n" + annotatedRole)}}),
			true, "its object ClusterRole web-reader is not owned by it (it is cluster-scoped)"},
		{"an object the helm CLI wrote", base(FinalizerFacts{Stored: []*release.Release{stored(cliCM)}}),
			true, "its object ConfigMap ns/web is not owned by it"},
		{"an object of an earlier resource of the name", base(FinalizerFacts{Stored: []*release.Release{stored(strings.ReplaceAll(ownedCM, "uid-me", "uid-gone"))}}),
			true, "ConfigMap ns/web is not owned by it"},
		{"an uninstalled revision deletes nothing", base(FinalizerFacts{Stored: []*release.Release{{Name: "web", Manifest: cliCM,
			Info: &release.Info{Status: release.StatusUninstalled}}}}), false, ""},
		{"a pre-delete hook stored", base(FinalizerFacts{Stored: []*release.Release{stored(ownedCM, hook(release.HookPreDelete))}}),
			true, "its chart has a pre-delete hook (Job web-hook)"},
		{"a post-delete hook stored", base(FinalizerFacts{Stored: []*release.Release{stored(ownedCM, hook(release.HookPostInstall, release.HookPostDelete))}}),
			true, "post-delete hook"},
		{"other hooks: the uninstall leaves them too", base(FinalizerFacts{Stored: []*release.Release{stored(ownedCM,
			hook(release.HookPreInstall, release.HookPostUpgrade), hook(release.HookTest))}}), false, ""},
		{"a record the helm CLI wrote", base(FinalizerFacts{Stored: []*release.Release{stored(ownedCM)},
			Records: []metav1.Object{record("sh.helm.release.v1.web.v1", ""), record("sh.helm.release.v1.web.v2", "uid-me")}}),
			true, "the record sh.helm.release.v1.web.v1 of its history is not owned by it"},
		{"a record of another owner", base(FinalizerFacts{Records: []metav1.Object{record("sh.helm.release.v1.web.v1", "uid-other")}}),
			true, "not owned by it"},
		{"planned: namespaced objects of its namespace", base(FinalizerFacts{Planned: &Planned{Objects: []*unstructured.Unstructured{
			obj("v1", "ConfigMap", "ns", "a", nil), obj("v1", "ConfigMap", "", "b", nil)}}}), false, ""},
		{"planned: a cluster-scoped object", base(FinalizerFacts{Planned: &Planned{Objects: []*unstructured.Unstructured{
			obj("v1", "ConfigMap", "ns", "a", nil), obj("rbac.authorization.k8s.io/v1", "ClusterRole", "ns", "r", nil)}}}),
			true, "it has cluster-scoped objects (ClusterRole r)"},
		{"planned: another namespace", base(FinalizerFacts{Planned: &Planned{Objects: []*unstructured.Unstructured{
			obj("v1", "ConfigMap", "other", "a", nil)}}}), true, "it has objects in other namespaces (ConfigMap other/a)"},
		{"planned: a kept cluster-scoped object", base(FinalizerFacts{Planned: &Planned{Objects: []*unstructured.Unstructured{
			obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", map[string]string{"helm.sh/resource-policy": "keep"})}}}), false, ""},
		{"planned: a kind not served", base(FinalizerFacts{Planned: &Planned{Objects: []*unstructured.Unstructured{
			obj("example.com/v1", "Thing", "ns", "t", nil)}}}), true, "the scope of its object Thing t is not known"},
		{"planned: a delete hook", base(FinalizerFacts{Planned: &Planned{Hooks: []*release.Hook{hook(release.HookPreDelete)}}}),
			true, "pre-delete hook"},
		{"a cluster-scoped resource owns anything", FinalizerFacts{Owner: "uid-me", Mapper: finalizerMapper(),
			Planned: &Planned{Objects: []*unstructured.Unstructured{obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", nil),
				obj("v1", "ConfigMap", "other", "a", nil)}}}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := NeedsFinalizer(tt.facts)
			if got != tt.want || !strings.Contains(why, tt.wantWhy) || (!got && why != "") {
				t.Errorf("NeedsFinalizer = %v, %q; want %v, %q", got, why, tt.want, tt.wantWhy)
			}
		})
	}
}

func TestLatestAt(t *testing.T) {
	rec := func(name, rv, version string) metav1.Object {
		return &metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{"version": version}}
	}
	if got := latestAt(nil); got != "" {
		t.Errorf("latestAt(nil) = %q", got)
	}
	got := latestAt([]metav1.Object{rec("v9", "5", "9"), rec("v10", "7", "10"), rec("v2", "9", "2")})
	if got != "v10@7" {
		t.Errorf("latestAt = %q, want v10@7 (by version, not by name or resourceVersion)", got)
	}
}
