package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reconcile path never runs a Helm dry run, so no "dry run" can change a
// release (helm-operator-plugins #227, where a dry-run upgrade really rolled
// back). This guards the packages that run Helm actions against a cluster.
func TestNoDryRunOnTheReconcilePath(t *testing.T) {
	for _, dir := range []string{".", "../reconciler"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "DryRun") {
				t.Errorf("%s uses a Helm or API dry run", f)
			}
		}
	}
}
