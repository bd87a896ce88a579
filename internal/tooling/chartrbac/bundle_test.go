package chartrbac

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// copyProject copies what the bundle is generated from into a new root.
func copyProject(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range []string{"config", "helm-charts"} {
		if err := os.CopyFS(filepath.Join(root, p), os.DirFS(filepath.Join(testutil.RepoRoot(), p))); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"watches.yaml", "PROJECT"} {
		b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestBundleOfSealedSecretsRules generates the bundle of a project holding
// sealed-secrets' rules: they become the CSV's clusterPermissions, and the
// bundle validates with 0 errors and 0 warnings (operatorframework suite)
// when the chart's crds/ ship with the operator (SkipCRDs), while the rule
// to apply them itself draws the validators' warning about creating CRDs,
// as Discover's note says.
func TestBundleOfSealedSecretsRules(t *testing.T) {
	n, err := Discover(sealedSecrets.load(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Notes, func(s string) bool { return strings.Contains(s, "CR.SkipCRDs") }) {
		t.Errorf("no note on the CRD rule and the validators: %v", n.Notes)
	}
	for _, skip := range []bool{true, false} {
		root := copyProject(t)
		cr := CR{Group: "security.helmapp.io", Version: "v1alpha1", Kind: "SealedSecrets", Plural: "sealedsecrets", Chart: "helm-charts/sealed-secrets", SkipCRDs: skip}
		if err := WriteRules(root, cr, n); err != nil {
			t.Fatal(err)
		}
		files, err := bundle.Generate(bundle.Options{Root: root, Version: "0.1.0", Image: "example.com/helm-app-operator:0.1.0", Channels: []string{"candidate"}, CreatedAt: time.Unix(0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		if err := files.Write(root); err != nil {
			t.Fatal(err)
		}
		csv, err := bundle.ReadCSV(root)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
			for _, r := range p.Rules {
				if slices.Contains(r.Resources, "sealedsecrets/status") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("SkipCRDs=%v: the rules of ClusterRole secrets-unsealer are not in the CSV's clusterPermissions", skip)
		}
		r, err := bundle.Validate(filepath.Join(root, bundle.BundleDir), bundle.DefaultK8sVersion)
		if err != nil {
			t.Fatal(err)
		}
		crdWarning := slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "permissions to create CRD") })
		switch {
		case len(r.Errors) > 0:
			t.Errorf("SkipCRDs=%v: errors %v", skip, r.Errors)
		case skip && len(r.Warnings) > 0:
			t.Errorf("SkipCRDs=true: warnings %v", r.Warnings)
		case !skip && !crdWarning:
			t.Errorf("SkipCRDs=false: warnings %v, want the one on creating CRDs", r.Warnings)
		}
	}
}
