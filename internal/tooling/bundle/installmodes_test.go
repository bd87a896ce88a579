package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
)

var allModes = []v1alpha1.InstallMode{
	{Type: v1alpha1.InstallModeTypeOwnNamespace, Supported: true},
	{Type: v1alpha1.InstallModeTypeSingleNamespace, Supported: true},
	{Type: v1alpha1.InstallModeTypeMultiNamespace, Supported: true},
	{Type: v1alpha1.InstallModeTypeAllNamespaces, Supported: true},
}

func supported(modes []v1alpha1.InstallMode) []string {
	var out []string
	for _, m := range modes {
		if m.Supported {
			out = append(out, string(m.Type))
		}
	}
	return out
}

// TestInstallModesFollowTheScope: an operator whose kinds' releases create
// objects every install would share (cluster-scoped or in a fixed other
// namespace, with no {{namespace}} in the name) is offered AllNamespaces
// only; objects named after the namespace, or none, leave the modes.
func TestInstallModesFollowTheScope(t *testing.T) {
	entry := "- group: g.io\n  version: v1\n  kind: K\n  chart: helm-charts/k\n"
	tests := []struct {
		name, scope string
		base        []v1alpha1.InstallMode
		want        string // supported modes; "error: ..." for an error
	}{
		{"no scope", "", allModes, "OwnNamespace,SingleNamespace,MultiNamespace,AllNamespaces"},
		{"names with the namespace", "  scope:\n    clusterScoped:\n    - {group: rbac.authorization.k8s.io, kind: ClusterRole, names: ['{{namespace}}-{{release}}']}\n", allModes, "OwnNamespace,SingleNamespace,MultiNamespace,AllNamespaces"},
		{"a fixed name", "  scope:\n    clusterScoped:\n    - {group: storage.k8s.io, kind: CSIDriver, names: [secrets-store.csi.k8s.io]}\n", allModes, "AllNamespaces"},
		{"named after the release", "  scope:\n    clusterScoped:\n    - {group: rbac.authorization.k8s.io, kind: ClusterRole, names: ['{{release}}-x']}\n", allModes, "AllNamespaces"},
		{"in another namespace", "  scope:\n    namespaces:\n    - {group: '', kind: ConfigMap, namespaces: [kube-system], names: [x]}\n", allModes, "AllNamespaces"},
		{"AllNamespaces not offered", "  scope:\n    clusterScoped:\n    - {group: storage.k8s.io, kind: CSIDriver, names: [x]}\n", allModes[:3], "error: the base CSV does not support the AllNamespaces install mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "watches.yaml"), []byte(entry+tt.scope), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := installModes(root, tt.base)
			if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := strings.Join(supported(got), ","); s != tt.want {
				t.Errorf("supported %s, want %s", s, tt.want)
			}
			if len(got) != len(tt.base) {
				t.Errorf("%d modes listed, want every mode of the base (%d), unsupported ones as such", len(got), len(tt.base))
			}
		})
	}
}

// TestGenerateOffersAllNamespacesForSharedObjects generates the bundle of a
// copy of the project whose Nginx releases create a fixed-name
// cluster-scoped object: the CSV offers AllNamespaces only, and the bundle
// still validates with 0 errors and 0 warnings.
func TestGenerateOffersAllNamespacesForSharedObjects(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"config", "helm-charts", "watches.yaml", "PROJECT"} {
		if err := os.CopyFS(filepath.Join(root, p), os.DirFS(filepath.Join(repoRoot, p))); err != nil {
			// a file, not a directory
			b, err := os.ReadFile(filepath.Join(repoRoot, p))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	w := filepath.Join(root, "watches.yaml")
	b, err := os.ReadFile(w)
	if err != nil {
		t.Fatal(err)
	}
	scoped := strings.Replace(string(b), "  chart: helm-charts/nginx\n", "  chart: helm-charts/nginx\n  scope:\n    clusterScoped:\n    - {group: rbac.authorization.k8s.io, kind: ClusterRole, names: [nginx-reader]}\n", 1)
	if err := os.WriteFile(w, []byte(scoped), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Root: root, Version: "0.1.0", Image: "example.com/helm-app-operator:0.1.0", Channels: []string{"candidate"}, CreatedAt: time.Unix(0, 0)}
	_, dir, csv := generated(t, opts)
	if s := strings.Join(supported(csv.Spec.InstallModes), ","); s != "AllNamespaces" {
		t.Errorf("install modes %s, want AllNamespaces only", s)
	}
	r, err := Validate(filepath.Join(dir, BundleDir), DefaultK8sVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors)+len(r.Warnings) > 0 {
		t.Errorf("the bundle does not validate: %+v", r)
	}
}

// TestSplitRBACDropsEmptyClusterPermissions: manager-cluster-role with no
// rules (no chart of the project needs a cluster-wide rule) gives no
// clusterPermissions entry, and is not shipped either.
func TestSplitRBACDropsEmptyClusterPermissions(t *testing.T) {
	objs := objects(t, `apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: sys}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: manager-cluster-role}
rules:
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: manager-cluster-rolebinding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: manager-cluster-role}
subjects: [{kind: ServiceAccount, name: op, namespace: sys}]
`)
	got, err := splitRBAC(objs, "sys", []string{"op"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ClusterPermissions) != 0 {
		t.Errorf("clusterPermissions = %+v; want none for a role without rules", got.ClusterPermissions)
	}
	for _, o := range objs {
		if !got.Consumed[o] {
			t.Errorf("%s %s would be shipped", o.GetKind(), o.GetName())
		}
	}
}
