package chartrbac

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// realChart is a chart no one here wrote, inside a Go module at a pinned
// version (issue 39): the module cache holds it once per machine.
type realChart struct{ module, dir string }

var (
	sealedSecrets = realChart{"github.com/bitnami-labs/sealed-secrets@v0.32.2", "helm/sealed-secrets"}
	gatekeeper    = realChart{"github.com/open-policy-agent/gatekeeper/v3@v3.20.1", "charts/gatekeeper"}
	csiDriver     = realChart{"sigs.k8s.io/secrets-store-csi-driver@v1.5.4", "charts/secrets-store-csi-driver"}
)

// load loads the chart from the module cache (read only: the loader only
// reads).
func (c realChart) load(t testing.TB) *chart.Chart {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", c.module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", c.module, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %s %v", c.module, m.Error, err)
	}
	ch, err := loader.Load(filepath.Join(m.Dir, c.dir))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// ourChart loads helm-charts/<name>.
func ourChart(t testing.TB, name string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(filepath.Join(testutil.RepoRoot(), "helm-charts", name))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
