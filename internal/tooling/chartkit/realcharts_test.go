package chartkit

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// realCharts are charts no one here wrote (issue 39), pinned, from the Go
// module cache (go mod download; the files there are read-only, and the
// command only reads its source).
var realCharts = []struct {
	module, dir, kind, group string
}{
	{"github.com/bitnami-labs/sealed-secrets@v0.32.2", "helm/sealed-secrets", "SealedSecretsController", ""},
	{"github.com/open-policy-agent/gatekeeper/v3@v3.20.1", "charts/gatekeeper", "Gatekeeper", "policy"},
	{"sigs.k8s.io/secrets-store-csi-driver@v1.5.4", "charts/secrets-store-csi-driver", "SecretsStoreCSIDriver", "csi"},
}

// moduleDir returns the directory of a module version in the module cache,
// downloading it through the module proxy the first time.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: no Dir in %s", module, out)
	}
	return m.Dir
}

// TestAddRealCharts adds each real chart to a scratch copy of the project,
// all three side by side: each add succeeds, the kinds' CRDs are generated,
// adding the three again changes no byte, and removing them gives the project
// back byte for byte.
func TestAddRealCharts(t *testing.T) {
	root := copyProject(t)
	main := readTree(t, root)
	var opts []Options
	for _, c := range realCharts {
		o := Options{Root: root, Source: Source{Chart: filepath.Join(moduleDir(t, c.module), c.dir)}, Kind: c.kind, Group: c.group}
		opts = append(opts, o)
		rep := mustAdd(t, o)
		if len(rep.Changed) == 0 {
			t.Errorf("%s: the add reports no change", c.kind)
		}
		if len(rep.Images) == 0 {
			t.Errorf("%s: no image mapped; unmapped: %v", c.kind, rep.Unmapped)
		}
		crd := filepath.Join(root, "config", "crd", "bases", rep.Names.crdFile())
		if _, err := os.Stat(crd); err != nil {
			t.Errorf("%s: no CRD: %v", c.kind, err)
		}
	}
	added := readTree(t, root)
	for _, o := range opts {
		if rep := mustAdd(t, o); len(rep.Changed) > 0 {
			t.Errorf("%s: adding again reports %v", o.Kind, rep.Changed)
		}
	}
	if d := treeDiff(added, readTree(t, root)); len(d) > 0 {
		t.Errorf("adding the real charts again changed %v", d)
	}
	for _, c := range realCharts {
		if _, err := Remove(root, c.kind); err != nil {
			t.Fatalf("remove %s: %v", c.kind, err)
		}
	}
	if d := treeDiff(main, readTree(t, root)); len(d) > 0 {
		t.Errorf("removing the real charts left %v", d)
	}
}
