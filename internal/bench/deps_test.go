package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// Nothing of the benchmark, of the baseline's reconciler or of the image
// tooling is part of the product's binary.
func TestProductBinaryDoesNotLinkTheBaseline(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/helmapp/helm-app-operator").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/operator-framework/helm-operator-plugins/pkg/reconciler" ||
			strings.HasPrefix(pkg, "github.com/helmapp/helm-app-operator/internal/bench") ||
			strings.HasPrefix(pkg, "github.com/helmapp/helm-app-operator/hack/") ||
			// Image building (make image-push, bundle-push, catalog-push) is tooling.
			strings.HasPrefix(pkg, "github.com/helmapp/helm-app-operator/internal/image") ||
			strings.HasPrefix(pkg, "github.com/helmapp/helm-app-operator/internal/ship") ||
			strings.HasPrefix(pkg, "github.com/google/go-containerregistry") {
			t.Errorf("the manager binary links %s", pkg)
		}
	}
}
