package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// helmSDK are the import paths of the Helm SDK: Helm's own packages, and
// helm-operator-plugins', which are built on Helm 3 and would move with it.
var helmSDK = []string{"helm.sh/helm/", "github.com/operator-framework/helm-operator-plugins/"}

// helmPackages are the packages of the module that may import any of the
// Helm SDK, so that moving the operator to the Helm 4 SDK is a change to
// them (docs/helm4.md, "Where the boundary stands"): the release state
// machine, the wiring of each action configuration, and the release
// storage (Helm's driver interface and record format).
var helmPackages = map[string]bool{"internal/release": true, "internal/operator": true, "internal/storage": true}

// helmElsewhere is every other package that imports the Helm SDK today, with
// exactly what it imports and why it stays; docs/helm4.md lists the same.
// Nothing here runs a Helm action against a cluster or reads Helm's storage.
var helmElsewhere = map[string][]string{
	// Tooling, never linked into the manager: it renders the product charts
	// client-only for their tests and the bundle. It cannot live in
	// internal/release, whose reconcile path runs no dry run
	// (TestNoDryRunOnTheReconcilePath).
	"internal/tooling/charts": {"helm.sh/helm/v3/pkg/action", "helm.sh/helm/v3/pkg/chart",
		"helm.sh/helm/v3/pkg/chart/loader", "helm.sh/helm/v3/pkg/releaseutil"},
	// Tooling: renders a chart client-only, with its toggles, hooks and the
	// capabilities it probes, to find the kinds it creates and the RBAC
	// they need (make chart).
	"internal/tooling/chartrbac": {"helm.sh/helm/v3/pkg/action", "helm.sh/helm/v3/pkg/chart",
		"helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/releaseutil"},
	// Tooling: make chart fetches a chart as Helm does (registry client,
	// pull action, dependency manager, repository getters), renders it
	// client-only to check which image values Helm honours, and builds the
	// CRD from the watches entry (make manifests).
	"internal/tooling/chartkit": {"github.com/operator-framework/helm-operator-plugins/pkg/watches",
		"helm.sh/helm/v3/pkg/action", "helm.sh/helm/v3/pkg/chart", "helm.sh/helm/v3/pkg/chart/loader",
		"helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/cli", "helm.sh/helm/v3/pkg/downloader",
		"helm.sh/helm/v3/pkg/getter", "helm.sh/helm/v3/pkg/registry", "helm.sh/helm/v3/pkg/releaseutil",
		"helm.sh/helm/v3/pkg/strvals"},
	// Tooling: reads the charts' values and --set overrides for the bundle.
	"internal/tooling/bundle": {"helm.sh/helm/v3/pkg/chart/loader", "helm.sh/helm/v3/pkg/strvals"},
	// Tooling: generates the CRDs from watches.yaml and the charts' schemas.
	"internal/tooling/crdgen": {"github.com/operator-framework/helm-operator-plugins/pkg/watches", "helm.sh/helm/v3/pkg/chart"},
	"hack/gencrd":             {"github.com/operator-framework/helm-operator-plugins/pkg/watches"},
	// The benchmark's baseline is helm-operator-plugins' own reconciler.
	"hack/bench/baseline": {"github.com/operator-framework/helm-operator-plugins/pkg/annotation",
		"github.com/operator-framework/helm-operator-plugins/pkg/reconciler",
		"github.com/operator-framework/helm-operator-plugins/pkg/watches"},
	// Linked into the manager: watches.yaml is loaded with
	// helm-operator-plugins' loader, which loads the charts, and its
	// overrideValues are parsed as Helm's --set is.
	"internal/watches": {"github.com/operator-framework/helm-operator-plugins/pkg/watches",
		"helm.sh/helm/v3/pkg/chart/loader", "helm.sh/helm/v3/pkg/strvals"},
}

// The Helm SDK is imported only by internal/release, internal/operator and
// internal/storage, and by the packages of helmElsewhere for exactly the imports listed there.
// A new import elsewhere fails, and so does a listed one that is gone (the
// list, and docs/helm4.md, must say where the boundary stands). Test files
// are not covered: tests read Helm's storage to check what a user sees.
func TestHelmImportBoundary(t *testing.T) {
	const module = "github.com/helmapp/helm-app-operator"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		for _, imp := range fields[1:] {
			if isHelmSDK(imp) && !helmPackages[pkg] {
				got[pkg] = append(got[pkg], imp)
			}
		}
	}
	for pkg, imps := range got {
		allowed := map[string]bool{}
		for _, a := range helmElsewhere[pkg] {
			allowed[a] = true
		}
		for _, imp := range imps {
			if !allowed[imp] {
				t.Errorf("%s imports %s: the Helm SDK belongs in internal/release, internal/operator or internal/storage (docs/helm4.md)", orRoot(pkg), imp)
			}
		}
	}
	for pkg, want := range helmElsewhere {
		have := map[string]bool{}
		for _, imp := range got[pkg] {
			have[imp] = true
		}
		var gone []string
		for _, imp := range want {
			if !have[imp] {
				gone = append(gone, imp)
			}
		}
		sort.Strings(gone)
		if len(gone) > 0 {
			t.Errorf("%s no longer imports %s: remove it from helmElsewhere and from docs/helm4.md", orRoot(pkg), strings.Join(gone, ", "))
		}
	}
}

func isHelmSDK(imp string) bool {
	for _, p := range helmSDK {
		if strings.HasPrefix(imp, p) {
			return true
		}
	}
	return false
}

func orRoot(pkg string) string {
	if pkg == "" {
		return "the root package"
	}
	return pkg
}
