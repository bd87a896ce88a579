package chartrbac

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// ourKinds are the kinds of helm-charts/ and their resources.
var ourKinds = []struct {
	chart string
	cr    CR
}{
	{"nginx", CR{Group: "web.helmapp.io", Version: "v1alpha1", Kind: "Nginx", Plural: "nginxes", Chart: "helm-charts/nginx"}},
	{"echo", CR{Group: "web.helmapp.io", Version: "v1alpha1", Kind: "Echo", Plural: "echoes", Chart: "helm-charts/echo"}},
}

// rbacFiles are the files WriteRules may change.
var rbacFiles = []string{RolePath, ClusterRolePath, ClusterRoleBindingPath, TenancyRolePath, rbacKustomizationPath}

// scratchProject copies the RBAC files of the checkout into a new root.
func scratchProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range rbacFiles {
		b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), p))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range rbacFiles {
		b, err := os.ReadFile(filepath.Join(root, p))
		if errors.Is(err, os.ErrNotExist) {
			out[p] = "(missing)"
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

// TestOurChartsRulesAreGenerated checks that the committed blocks of Nginx
// and Echo in config/rbac and config/tenancy are what WriteRules writes
// from Discover of helm-charts/nginx and helm-charts/echo, so that no hand
// edit drifts from the charts. CHARTRBAC_UPDATE=1 writes them.
func TestOurChartsRulesAreGenerated(t *testing.T) {
	root := scratchProject(t)
	if os.Getenv("CHARTRBAC_UPDATE") == "1" {
		root = testutil.RepoRoot()
	}
	want := snapshot(t, testutil.RepoRoot())
	for _, k := range ourKinds {
		n, err := Discover(ourChart(t, k.chart))
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Unresolved) > 0 || len(n.Cluster) > 0 {
			t.Errorf("%s: unresolved %v, cluster rules %v: our charts are namespaced", k.chart, n.Unresolved, n.Cluster)
		}
		if err := WriteRules(root, k.cr, n); err != nil {
			t.Fatal(err)
		}
	}
	for p, got := range snapshot(t, root) {
		if got != want[p] {
			t.Errorf("%s is not what `make chart` writes for helm-charts/nginx and helm-charts/echo (CHARTRBAC_UPDATE=1 go test ./internal/tooling/chartrbac -run TestOurChartsRulesAreGenerated rewrites it):\n%s", p, got)
		}
	}
}

// readRole reads the rules of the role in the file at root/p.
func readRole(t *testing.T, root, p string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.ClusterRole
	if err := sigsyaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return r.Rules
}

// TestWriteRulesIsIdempotentAndRemovable writes a real chart's rules into a
// copy of the project: the files then hold exactly the rules Discover
// found (manager-role: the custom resource's and the namespaced ones;
// manager-cluster-role: the cluster ones), writing again changes no byte,
// and RemoveRules gives back the files as they were.
func TestWriteRulesIsIdempotentAndRemovable(t *testing.T) {
	root := scratchProject(t)
	before := snapshot(t, root)
	n, err := Discover(sealedSecrets.load(t))
	if err != nil {
		t.Fatal(err)
	}
	cr := CR{Group: "security.helmapp.io", Version: "v1alpha1", Kind: "SealedSecrets", Plural: "sealedsecrets", Chart: "helm-charts/sealed-secrets"}
	if err := WriteRules(root, cr, n); err != nil {
		t.Fatal(err)
	}
	once := snapshot(t, root)
	if err := WriteRules(root, cr, n); err != nil {
		t.Fatal(err)
	}
	if twice := snapshot(t, root); !reflect.DeepEqual(once, twice) {
		t.Errorf("writing twice changed the files")
	}

	role := readRole(t, root, RolePath)
	want := append(readRole(t, testutil.RepoRoot(), RolePath), crRulesOnly(cr)...)
	want = append(want, n.Namespaced...)
	if !reflect.DeepEqual(role, want) {
		t.Errorf("manager-role's rules:\n got %v\nwant %v", role, want)
	}
	if got := readRole(t, root, ClusterRolePath); !reflect.DeepEqual(got, append(readRole(t, testutil.RepoRoot(), ClusterRolePath), n.Cluster...)) {
		t.Errorf("manager-cluster-role's rules:\n got %v\nwant %v", got, n.Cluster)
	}
	for _, p := range []string{RolePath, ClusterRolePath, TenancyRolePath} {
		if !strings.Contains(once[p], beginMarker("SealedSecrets")) || !strings.Contains(once[p], "templates/") {
			t.Errorf("%s: no block of SealedSecrets naming the templates", p)
		}
	}
	if strings.Contains(once[ClusterRolePath], "templates/cluster-role.yaml") && !strings.Contains(once[ClusterRolePath], "rather than escalate or bind") {
		t.Errorf("%s does not say why the chart's roles' rules are included", ClusterRolePath)
	}

	if err := RemoveRules(root, "SealedSecrets"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveRules(root, "SealedSecrets"); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, root); !reflect.DeepEqual(before, after) {
		for p := range before {
			if before[p] != after[p] {
				t.Errorf("%s is not as it was before WriteRules:\n%s", p, after[p])
			}
		}
	}
}

func crRulesOnly(cr CR) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, d := range crRules(cr) {
		out = append(out, d.rule)
	}
	return out
}

// TestWriteRulesCreatesTheClusterRole: a project without
// manager-cluster-role gets it, its binding and both kustomization
// entries; a block whose end marker was deleted is an error, not a guess.
func TestWriteRulesCreatesTheClusterRole(t *testing.T) {
	root := scratchProject(t)
	for _, p := range []string{ClusterRolePath, ClusterRoleBindingPath} {
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	k := filepath.Join(root, rbacKustomizationPath)
	b, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	stripped := strings.ReplaceAll(strings.ReplaceAll(string(b), "- cluster_role.yaml\n", ""), "- cluster_role_binding.yaml\n", "")
	if err := os.WriteFile(k, []byte(stripped), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(csiDriver.load(t))
	if err != nil {
		t.Fatal(err)
	}
	cr := CR{Group: "csi.helmapp.io", Version: "v1alpha1", Kind: "SecretsStore", Plural: "secretsstores", Chart: "helm-charts/secrets-store-csi-driver"}
	if err := WriteRules(root, cr, n); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, root)
	if got[rbacKustomizationPath] != string(b) {
		t.Errorf("kustomization.yaml:\n%s\nwant\n%s", got[rbacKustomizationPath], b)
	}
	if !reflect.DeepEqual(readRole(t, root, ClusterRolePath), n.Cluster) {
		t.Errorf("manager-cluster-role does not hold the chart's cluster rules")
	}
	var crb rbacv1.ClusterRoleBinding
	if err := sigsyaml.UnmarshalStrict([]byte(got[ClusterRoleBindingPath]), &crb); err != nil || crb.RoleRef.Name != "manager-cluster-role" {
		t.Errorf("cluster_role_binding.yaml: %+v, %v", crb, err)
	}

	broken := strings.Replace(got[RolePath], endMarker("SecretsStore")+"\n", "", 1)
	if err := os.WriteFile(filepath.Join(root, RolePath), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteRules(root, cr, n); err == nil || !strings.Contains(err.Error(), "markers of SecretsStore are broken") {
		t.Errorf("WriteRules over a broken block: %v", err)
	}
}
