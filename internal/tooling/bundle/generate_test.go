package bundle

import (
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func objects(t *testing.T, y string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decodeObjects([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

const rbacFixture = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: sys}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: manager}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leader, namespace: sys}
rules: [{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: crds}
rules: [{apiGroups: [apiextensions.k8s.io], resources: [customresourcedefinitions], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: viewer}
rules: [{apiGroups: [web.helmapp.io], resources: [nginxes], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: manager, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: manager}
subjects: [{kind: ServiceAccount, name: op, namespace: sys}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader}
subjects: [{kind: ServiceAccount, name: op, namespace: sys}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: crds}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: crds}
subjects: [{kind: ServiceAccount, name: op, namespace: sys}]
`

func TestSplitRBAC(t *testing.T) {
	objs := objects(t, rbacFixture)
	got, err := splitRBAC(objs, "sys", []string{"op"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Permissions) != 1 || got.Permissions[0].ServiceAccountName != "op" || len(got.Permissions[0].Rules) != 2 ||
		got.Permissions[0].Rules[0].Resources[0] != "secrets" || got.Permissions[0].Rules[1].Resources[0] != "leases" {
		t.Errorf("permissions = %+v; want the RoleBinding-bound ClusterRole's then Role's rules", got.Permissions)
	}
	if len(got.ClusterPermissions) != 1 || got.ClusterPermissions[0].Rules[0].Resources[0] != "customresourcedefinitions" {
		t.Errorf("clusterPermissions = %+v; want the ClusterRoleBinding-bound ClusterRole's rules", got.ClusterPermissions)
	}
	var kept []string
	for _, o := range objs {
		if !got.Consumed[o] {
			kept = append(kept, o.GetKind()+"/"+o.GetName())
		}
	}
	if strings.Join(kept, ",") != "ClusterRole/viewer" {
		t.Errorf("kept %v; want only the unbound ClusterRole/viewer", kept)
	}

	// A binding of the operator together with someone else cannot be split.
	mixed := objects(t, rbacFixture+`---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: shared, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: viewer}
subjects: [{kind: ServiceAccount, name: op, namespace: sys}, {kind: User, name: alice}]
`)
	if _, err := splitRBAC(mixed, "sys", []string{"op"}); err == nil || !strings.Contains(err.Error(), "other subjects") {
		t.Errorf("a shared binding: err = %v", err)
	}
	missing := objects(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: x, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: nope}
subjects: [{kind: ServiceAccount, name: op, namespace: sys}]
`)
	if _, err := splitRBAC(missing, "sys", []string{"op"}); err == nil || !strings.Contains(err.Error(), "Role/nope") {
		t.Errorf("a binding to a missing role: err = %v", err)
	}
}

func TestSetManagerImage(t *testing.T) {
	const kustomization = "resources:\n- manager.yaml\nimages:\n- name: controller\n  newName: quay.io/a/b\n  newTag: 0.1.0\n"
	tests := []struct{ image, want string }{
		{"quay.io/helmapp/helm-app-operator:1.2.3", "newName: quay.io/helmapp/helm-app-operator\n  newTag: 1.2.3"},
		{"localhost:5000/op@sha256:" + strings.Repeat("0", 64), "digest: sha256:" + strings.Repeat("0", 64) + "\n  name: controller\n  newName: localhost:5000/op"},
		{"op", "name: controller\n  newName: op\nresources"},
	}
	for _, tc := range tests {
		fs := filesys.MakeFsInMemory()
		if err := fs.WriteFile("/k.yaml", []byte(kustomization)); err != nil {
			t.Fatal(err)
		}
		if err := setManagerImage(fs, "/k.yaml", tc.image); err != nil {
			t.Fatalf("%s: %v", tc.image, err)
		}
		got, _ := fs.ReadFile("/k.yaml")
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("%s: got\n%s\nwant it to contain\n%s", tc.image, got, tc.want)
		}
	}
	fs := filesys.MakeFsInMemory()
	_ = fs.WriteFile("/k.yaml", []byte("resources: [manager.yaml]\n"))
	if err := setManagerImage(fs, "/k.yaml", "op:1"); err == nil {
		t.Error("no controller images entry: want an error")
	}
	if err := setManagerImage(fs, "/k.yaml", "Not A Ref"); err == nil {
		t.Error("an invalid image: want an error")
	}
}

func TestCheckOwnedCRDs(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "things.example.com"
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	enum := apiextensionsv1.JSONSchemaProps{Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"A"`)}, {Raw: []byte(`"B"`)}}}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Schema: &apiextensionsv1.CustomResourceValidation{
		OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size": {Type: "integer"}, "name": str, "mode": enum, "on": {Type: "boolean"},
			}},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"conditions": {Type: "array"}}},
		}},
	}}}
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{crd.Name: crd}
	good := v1alpha1.CRDDescription{
		Name: crd.Name, Version: "v1", Kind: "Thing", DisplayName: "Thing", Description: "A thing.",
		Resources: []v1alpha1.APIResourceReference{{Kind: "ConfigMap", Version: "v1"}},
		SpecDescriptors: []v1alpha1.SpecDescriptor{
			{Path: "size", XDescriptors: []string{uiPrefix + "podCount"}},
			{Path: "mode", XDescriptors: []string{selectPrefix + "A", selectPrefix + "B"}},
			{Path: "name", XDescriptors: []string{uiPrefix + "text", dependencyPrefix + "on:true"}},
		},
		StatusDescriptors: []v1alpha1.StatusDescriptor{{Path: "conditions", XDescriptors: []string{conditionsXDesc}}},
	}
	example := objects(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\nspec: {size: 1, mode: A}\n")
	served := map[string]bool{"/Thing": true}
	if err := checkOwnedCRDs([]v1alpha1.CRDDescription{good}, crds, example, served); err != nil {
		t.Fatalf("a good description: %v", err)
	}
	// A chart's CRD shipped with the operator (make chart CRDS=bundle) is
	// described, but the operator does not serve it: neither resources nor
	// a conditions descriptor are asked of it.
	chartCRD := v1alpha1.CRDDescription{Name: crd.Name, Version: "v1", Kind: "Thing", DisplayName: "Thing", Description: "A chart's thing."}
	if err := checkOwnedCRDs([]v1alpha1.CRDDescription{chartCRD}, crds, nil, nil); err != nil {
		t.Errorf("a chart's CRD the operator does not serve: %v", err)
	}
	if err := checkOwnedCRDs([]v1alpha1.CRDDescription{chartCRD}, crds, nil, served); err == nil {
		t.Errorf("a served kind without resources and conditions descriptor passed")
	}

	tests := []struct {
		name   string
		mutate func(d *v1alpha1.CRDDescription)
		want   string
	}{
		{"no resources", func(d *v1alpha1.CRDDescription) { d.Resources = nil }, "resources"},
		{"no description", func(d *v1alpha1.CRDDescription) { d.Description = "" }, "description"},
		{"an example field without descriptor", func(d *v1alpha1.CRDDescription) { d.SpecDescriptors = d.SpecDescriptors[1:] }, "spec.size"},
		{"a path not in the schema", func(d *v1alpha1.CRDDescription) { d.SpecDescriptors[2].Path = "nme" }, "not a field"},
		{"a widget that does not fit", func(d *v1alpha1.CRDDescription) {
			d.SpecDescriptors[0].XDescriptors = []string{uiPrefix + "booleanSwitch"}
		}, "does not fit"},
		{"an enum without selects", func(d *v1alpha1.CRDDescription) { d.SpecDescriptors[1].XDescriptors = []string{uiPrefix + "text"} }, "enum"},
		{"an incomplete select", func(d *v1alpha1.CRDDescription) { d.SpecDescriptors[1].XDescriptors = []string{selectPrefix + "A"} }, "enum"},
		{"a dependency on a missing field", func(d *v1alpha1.CRDDescription) {
			d.SpecDescriptors[2].XDescriptors = []string{dependencyPrefix + "off:true"}
		}, "not a field"},
		{"no conditions descriptor", func(d *v1alpha1.CRDDescription) { d.StatusDescriptors = nil }, "conditions"},
		{"an unknown widget", func(d *v1alpha1.CRDDescription) { d.SpecDescriptors[0].XDescriptors = []string{uiPrefix + "slider"} }, "unknown"},
	}
	for _, tc := range tests {
		d := good
		d.SpecDescriptors = append([]v1alpha1.SpecDescriptor(nil), good.SpecDescriptors...)
		tc.mutate(&d)
		err := checkOwnedCRDs([]v1alpha1.CRDDescription{d}, crds, example, served)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestCheckWatchNamespace(t *testing.T) {
	d := &appsv1.Deployment{}
	d.Name = "op"
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "manager"}}
	all := []v1alpha1.InstallMode{{Type: v1alpha1.InstallModeTypeAllNamespaces, Supported: true}}
	own := append(all, v1alpha1.InstallMode{Type: v1alpha1.InstallModeTypeOwnNamespace, Supported: true})
	if err := checkWatchNamespace(d, all); err != nil {
		t.Errorf("AllNamespaces only needs no WATCH_NAMESPACE: %v", err)
	}
	if err := checkWatchNamespace(d, own); err == nil {
		t.Error("OwnNamespace without WATCH_NAMESPACE: want an error")
	}
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: watchNamespaceEnv,
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: targetNamespacesPath}}}}
	if err := checkWatchNamespace(d, own); err != nil {
		t.Errorf("with WATCH_NAMESPACE from the annotation: %v", err)
	}
}

func TestManifestName(t *testing.T) {
	objs := objects(t, "apiVersion: v1\nkind: Service\nmetadata: {name: m}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n")
	if got := manifestName(objs[0]); got != "m_v1_service.yaml" {
		t.Errorf("core kind: %s", got)
	}
	if got := manifestName(objs[1]); got != "r_rbac.authorization.k8s.io_v1_clusterrole.yaml" {
		t.Errorf("grouped kind: %s", got)
	}
	if err := checkShippable(objects(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")[0], nil); err == nil {
		t.Error("a Deployment outside the CSV: want an error")
	}
}
