package readiness

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// manifest is shaped like a Helm release's: "---" before each document, a
// "# Source:" comment, and the odd empty or comment-only document.
const manifest = `---
# Source: nginx/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: web
---
# Source: nginx/templates/empty.yaml
# rendered to nothing with these values
---
---
# Source: nginx/templates/clusterrole.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: web-reader
  namespace: should-be-dropped
rules: []
--- # a separator with a comment
# Source: nginx/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: other   # set by the chart
  labels:
    app: web
spec:
  replicas: 3
---
# Source: nginx/templates/widget.yaml
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
items: [a, b]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: listed
`

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	return m
}

func TestObjectsFromManifest(t *testing.T) {
	got, err := ObjectsFromManifest(manifest, "ns", testMapper())
	if err != nil {
		t.Fatal(err)
	}
	want := []ObjectRef{
		{APIVersion: "v1", Kind: "ServiceAccount", Namespace: "ns", Name: "web"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "web-reader"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "other", Name: "web"},
		// Not in the mapper: taken as namespaced.
		{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "w"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "listed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ObjectsFromManifest() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestObjectsFromManifestWithoutMapper(t *testing.T) {
	got, err := ObjectsFromManifest("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Namespace != "ns" {
		t.Errorf("without a mapper every kind is namespaced; got %+v", got)
	}
}

func TestObjectsFromManifestEmpty(t *testing.T) {
	for _, m := range []string{"", "---\n", "---\n# only a comment\n---\n\n"} {
		got, err := ObjectsFromManifest(m, "ns", testMapper())
		if err != nil || len(got) != 0 {
			t.Errorf("ObjectsFromManifest(%q) = %v, %v; want nothing", m, got, err)
		}
	}
}

func TestObjectsFromManifestErrors(t *testing.T) {
	tests := []struct{ name, manifest, want string }{
		{"no kind", "---\n# Source: c/templates/a.yaml\napiVersion: v1\nmetadata:\n  name: a\n",
			"document 1 (c/templates/a.yaml) of the manifest: the object has no apiVersion or no kind"},
		{"no name", "---\napiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
			"document 1 of the manifest: the ConfigMap has no metadata.name"},
		{"not YAML", "---\napiVersion: v1\nkind: [unclosed\n", "document 1 of the manifest: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ObjectsFromManifest(tt.manifest, "ns", testMapper())
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestObjectRefString(t *testing.T) {
	if s := (ObjectRef{Kind: "Deployment", Namespace: "ns", Name: "web"}).String(); s != "Deployment ns/web" {
		t.Errorf("String() = %q", s)
	}
	if s := (ObjectRef{Kind: "ClusterRole", Name: "r"}).String(); s != "ClusterRole r" {
		t.Errorf("String() = %q", s)
	}
}

// DecodeManifest keeps each object whole, scoped as ObjectsFromManifest
// names it.
func TestDecodeManifest(t *testing.T) {
	objs, err := DecodeManifest(manifest, "ns", testMapper())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 5 {
		t.Fatalf("%d objects, want 5", len(objs))
	}
	if _, ok := objs[1].Object["metadata"].(map[string]any)["namespace"]; ok {
		t.Errorf("the cluster-scoped ClusterRole kept a namespace: %v", objs[1].Object["metadata"])
	}
	dep := objs[2]
	// Numbers are decoded as JSON's (float64), as release's re-apply always had them.
	if r, _, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "replicas"); r != float64(3) || dep.GetLabels()["app"] != "web" || dep.GetNamespace() != "other" {
		t.Errorf("the Deployment was not decoded whole: %v", dep.Object)
	}
	if items, _, _ := unstructured.NestedSlice(objs[3].Object, "items"); len(items) != 2 {
		t.Errorf("the Widget lost its own items field: %v", objs[3].Object)
	}
	if cm := objs[4]; cm.GetKind() != "ConfigMap" || cm.GetName() != "listed" || cm.GetNamespace() != "ns" {
		t.Errorf("the List's item = %v", cm.Object)
	}
}

// An object whose kind is not a List stays one object even when it has an
// "items" field of objects: only a List kind is replaced by its items.
// (release's own decoder, before it used this one, re-applied such items
// as objects of their own.)
func TestDecodeManifestItemsOfAnObjectThatIsNoList(t *testing.T) {
	m := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: inner\n"
	objs, err := DecodeManifest(m, "ns", testMapper())
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "Widget" || objs[0].GetName() != "w" {
		t.Errorf("DecodeManifest = %v, want the one Widget w", objs)
	}
}

func TestDecodeManifestListErrors(t *testing.T) {
	for _, m := range []string{
		"apiVersion: v1\nkind: ConfigMapList\nitems: 5\n",
		"apiVersion: v1\nkind: List\nitems: [a]\n",
	} {
		if _, err := DecodeManifest(m, "ns", testMapper()); err == nil || !strings.Contains(err.Error(), "reading the items of") {
			t.Errorf("DecodeManifest(%q) error = %v, want one about its items", m, err)
		}
	}
}
