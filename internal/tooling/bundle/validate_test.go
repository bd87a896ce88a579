package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// repoRoot is the checkout, two levels up from this package.
var repoRoot = filepath.Join("..", "..", "..")

// TestCommittedBundleValidates runs the registry's format checks, the default
// validators and the operatorframework suite on bundle/: nothing to forgive.
func TestCommittedBundleValidates(t *testing.T) {
	r, err := Validate(filepath.Join(repoRoot, BundleDir), DefaultK8sVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Errors {
		t.Errorf("ERROR: %s", e)
	}
	for _, w := range r.Warnings {
		t.Errorf("WARNING: %s", w)
	}
	t.Logf("bundle/: %d errors, %d warnings (k8s-version %s)", len(r.Errors), len(r.Warnings), DefaultK8sVersion)
}

// TestValidateCatchesProblems proves the validation is not vacuous: each
// mutation of a copy of the committed bundle is reported.
func TestValidateCatchesProblems(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(t *testing.T, dir string)
		wantLevel string // "error" or "warning"
		want      string // a substring of the finding
	}{{
		name:      "an icon of a media type OperatorHub refuses",
		mutate:    editCSV(func(s string) string { return replaceLine(s, "mediatype: image/svg+xml", "mediatype: text/plain") }),
		wantLevel: "error", want: "icon",
	}, {
		name:      "minKubeVersion not a full version",
		mutate:    editCSV(func(s string) string { return replaceLine(s, "minKubeVersion: 1.30.0", "minKubeVersion: \"1.30\"") }),
		wantLevel: "error", want: "minKubeVersion",
	}, {
		name:      "a channel named against the convention",
		mutate:    editFile(AnnotationsYAML, func(s string) string { return strings.ReplaceAll(s, ": candidate", ": alpha") }),
		wantLevel: "warning", want: "channel",
	}, {
		name:      "a wrong manifests annotation",
		mutate:    editFile(AnnotationsYAML, func(s string) string { return strings.Replace(s, ": manifests/", ": manifests", 1) }),
		wantLevel: "error", want: KeyManifests,
	}, {
		name: "a NetworkPolicy",
		mutate: writeFile("bundle/manifests/deny_networking.k8s.io_v1_networkpolicy.yaml",
			"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: deny\nspec:\n  podSelector: {}\n"),
		wantLevel: "error", want: "NetworkPolicy",
	}, {
		name: "the Deployment's ServiceAccount",
		mutate: writeFile("bundle/manifests/sa_v1_serviceaccount.yaml",
			"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: helm-app-operator-controller-manager\n"),
		wantLevel: "error", want: "ServiceAccount",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyBundle(t)
			tc.mutate(t, root)
			r, err := Validate(filepath.Join(root, BundleDir), DefaultK8sVersion)
			if err != nil {
				t.Fatal(err)
			}
			found := r.Errors
			if tc.wantLevel == "warning" {
				found = r.Warnings
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(tc.want)) }) {
				t.Errorf("no %s mentioning %q; errors %q, warnings %q", tc.wantLevel, tc.want, r.Errors, r.Warnings)
			}
		})
	}
}

// TestCommittedBundleContents checks what the issue asks of the bundle
// beyond the validators.
func TestCommittedBundleContents(t *testing.T) {
	csv, err := ReadCSV(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []v1alpha1.InstallModeType{v1alpha1.InstallModeTypeOwnNamespace, v1alpha1.InstallModeTypeSingleNamespace,
		v1alpha1.InstallModeTypeMultiNamespace, v1alpha1.InstallModeTypeAllNamespaces} {
		if !slices.Contains(csv.Spec.InstallModes, v1alpha1.InstallMode{Type: m, Supported: true}) {
			t.Errorf("install mode %s is not supported", m)
		}
	}
	if csv.Spec.MinKubeVersion == "" || strings.Count(csv.Spec.MinKubeVersion, ".") != 2 {
		t.Errorf("minKubeVersion %q is not a full version", csv.Spec.MinKubeVersion)
	}
	for _, k := range []string{"capabilities", "categories", "containerImage", "createdAt", "support", "repository", "description", "alm-examples"} {
		if csv.Annotations[k] == "" {
			t.Errorf("annotation %s is empty", k)
		}
	}

	// The description explains every condition of the status contract.
	for _, typ := range status.OwnedConditionTypes {
		if !strings.Contains(csv.Spec.Description, "`"+typ+"`") {
			t.Errorf("the CSV's description does not explain the condition %s", typ)
		}
	}

	// No wildcard grants, in permissions or clusterPermissions.
	st := csv.Spec.InstallStrategy.StrategySpec
	for _, p := range append(slices.Clone(st.Permissions), st.ClusterPermissions...) {
		for _, r := range p.Rules {
			if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
				t.Errorf("rule %+v grants a wildcard", r)
			}
		}
	}

	// The owned CRDs' descriptors, against the bundle's own CRDs and alm-examples.
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	paths, _ := filepath.Glob(filepath.Join(repoRoot, ManifestsDir, "*.yaml"))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := sigsyaml.Unmarshal(raw, crd); err == nil && crd.Kind == "CustomResourceDefinition" {
			crds[crd.Name] = crd
		}
	}
	var examples []*unstructured.Unstructured
	var raw []map[string]any
	if err := sigsyaml.Unmarshal([]byte(csv.Annotations["alm-examples"]), &raw); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	for _, m := range raw {
		examples = append(examples, &unstructured.Unstructured{Object: m})
	}
	if len(examples) != len(csv.Spec.CustomResourceDefinitions.Owned) {
		t.Errorf("%d alm-examples for %d owned CRDs", len(examples), len(csv.Spec.CustomResourceDefinitions.Owned))
	}
	served := map[string]bool{}
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		served[crds[d.Name].Spec.Group+"/"+d.Kind] = true // the committed bundle has only our kinds
	}
	if err := checkOwnedCRDs(csv.Spec.CustomResourceDefinitions.Owned, crds, examples, served); err != nil {
		t.Error(err)
	}
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		for _, p := range []string{"conditions", "deployedRelease.revision", "deployedRelease.chartVersion", "failedRelease.reason", "failedRelease.message"} {
			if !slices.ContainsFunc(d.StatusDescriptors, func(s v1alpha1.StatusDescriptor) bool { return s.Path == p }) {
				t.Errorf("%s has no statusDescriptor for %s", d.Name, p)
			}
		}
	}
}

// copyBundle copies bundle/ into a temporary root and returns the root.
func copyBundle(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(repoRoot, BundleDir)
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(root, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func editFile(rel string, edit func(string) string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		p := filepath.Join(root, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out := edit(string(b))
		if out == string(b) {
			t.Fatalf("the edit changed nothing in %s", rel)
		}
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func editCSV(edit func(string) string) func(*testing.T, string) {
	return editFile(filepath.Join(ManifestsDir, "helm-app-operator.clusterserviceversion.yaml"), edit)
}

func writeFile(rel, content string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// replaceLine replaces the first line whose trimmed text is old, keeping its
// indentation.
func replaceLine(s, old, new string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == old {
			lines[i] = l[:len(l)-len(strings.TrimLeft(l, " "))] + new
			break
		}
	}
	return strings.Join(lines, "\n")
}
