package chartrbac

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
