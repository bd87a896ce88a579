package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// managerPackages are exactly the packages of this module that the manager
// binary (this root package, main.go) links: the product. Tooling lives under
// internal/tooling and test support under internal/testing; neither may be
// linked, and a new package of the module is not linked until it is listed
// here (and in docs/architecture.md, "What the manager links").
var managerPackages = map[string]bool{
	"":                    true, // main.go
	"internal/operator":   true,
	"internal/storage":    true,
	"internal/watches":    true,
	"internal/reconciler": true,
	"internal/release":    true,
	"internal/status":     true,
	"internal/readiness":  true,
	"internal/dependents": true,
	"internal/metrics":    true,
	"internal/rollout":    true,
}

// notInTheManager are packages of other modules that the manager must not
// link either: the benchmark baseline's reconciler (helm-operator-plugins'
// own) and the image tooling's registry client.
var notInTheManager = []string{
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler",
	"github.com/google/go-containerregistry",
}

// The manager links exactly the packages of managerPackages from this module,
// and none of notInTheManager: a tooling package cannot slip into the binary,
// and a product package that is no longer linked must leave the list.
func TestManagerLinksOnlyTheProduct(t *testing.T) {
	const module = "github.com/helmapp/helm-app-operator"
	out, err := exec.Command("go", "list", "-deps", module).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	linked := map[string]bool{}
	for _, pkg := range strings.Fields(string(out)) {
		for _, deny := range notInTheManager {
			if pkg == deny || strings.HasPrefix(pkg, deny+"/") {
				t.Errorf("the manager binary links %s", pkg)
			}
		}
		if pkg != module && !strings.HasPrefix(pkg, module+"/") {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		linked[rel] = true
		if !managerPackages[rel] {
			t.Errorf("the manager binary links %s, which is not a product package (managerPackages)", pkg)
		}
	}
	var missing []string
	for pkg := range managerPackages {
		if !linked[pkg] {
			missing = append(missing, orRoot(pkg))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the manager binary no longer links %s: remove it from managerPackages and docs/architecture.md", strings.Join(missing, ", "))
	}
}
