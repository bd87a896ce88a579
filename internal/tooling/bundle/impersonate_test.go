package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// serviceAccountRules are the rules only per-resource ServiceAccounts need
// (config/service-accounts, config/tenancy): impersonate the ServiceAccount
// a resource names, and read its namespace when it is gone.
var serviceAccountRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
}

// serviceAccountRule tells whether r is (or contains) one of those rights.
func serviceAccountRule(r rbacv1.PolicyRule) bool {
	return slices.Contains(r.Verbs, "impersonate") || slices.Contains(r.Resources, "namespaces")
}

// TestImpersonateOnlyWhereServiceAccountsAreOn checks the generated
// configuration, as `make deploy` and OLM install it: the default
// (config/default, and the committed bundle's CSV) grants no impersonate at
// all and runs the manager without --service-accounts; each variant that
// switches ServiceAccounts on (config/service-accounts: allowed,
// config/tenancy: required, and their bundles) grants impersonate on
// serviceaccounts and nothing else, never users or groups.
func TestImpersonateOnlyWhereServiceAccountsAreOn(t *testing.T) {
	// The committed bundle, as OLM reads it: not even the word.
	csvPath := filepath.Join(repoRoot, ManifestsDir, "helm-app-operator.clusterserviceversion.yaml")
	raw, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "impersonate") {
		t.Errorf("the committed bundle's CSV grants impersonate")
	}
	csv, err := ReadCSV(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	st := csv.Spec.InstallStrategy.StrategySpec
	for _, p := range append(st.Permissions, st.ClusterPermissions...) {
		for _, r := range p.Rules {
			if serviceAccountRule(r) {
				t.Errorf("the committed bundle's CSV grants %v on %v", r.Verbs, r.Resources)
			}
		}
	}
	if mode := serviceAccountsFlag(st.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Args); mode != "" {
		t.Errorf("the committed bundle runs the manager with --service-accounts=%s", mode)
	}

	opts, err := OptionsFromBundle(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ variant, mode string }{{"", ""}, {VariantServiceAccounts, "allowed"}, {VariantTenancy, "required"}} {
		dir := "default"
		if tc.variant != "" {
			dir = tc.variant
		}
		t.Run(dir, func(t *testing.T) {
			// kustomize build config/<dir>, as `make deploy` applies it.
			rules, args := kustomized(t, filepath.Join(repoRoot, "config", dir))
			checkServiceAccountRules(t, "config/"+dir, rules, tc.mode != "")
			if got := serviceAccountsFlag(args); got != tc.mode {
				t.Errorf("config/%s runs the manager with --service-accounts=%q, want %q", dir, got, tc.mode)
			}

			// Its bundle, which validates as the committed one does.
			o := opts
			o.Variant = tc.variant
			_, bdir, csv := generated(t, o)
			if r, err := Validate(filepath.Join(bdir, BundleDir), DefaultK8sVersion); err != nil {
				t.Fatal(err)
			} else if len(r.Errors)+len(r.Warnings) > 0 {
				t.Errorf("the %s bundle does not validate: %v %v", dir, r.Errors, r.Warnings)
			}
			st := csv.Spec.InstallStrategy.StrategySpec
			var all []rbacv1.PolicyRule
			for _, p := range append(st.Permissions, st.ClusterPermissions...) {
				all = append(all, p.Rules...)
			}
			checkServiceAccountRules(t, "the "+dir+" bundle's CSV", all, tc.mode != "")
			if got := serviceAccountsFlag(st.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Args); got != tc.mode {
				t.Errorf("the %s bundle runs the manager with --service-accounts=%q, want %q", dir, got, tc.mode)
			}
		})
	}
}

// checkServiceAccountRules checks that rules grant exactly
// serviceAccountRules when on, and none of them otherwise.
func checkServiceAccountRules(t *testing.T, what string, rules []rbacv1.PolicyRule, on bool) {
	t.Helper()
	var got []rbacv1.PolicyRule
	for _, r := range rules {
		if serviceAccountRule(r) {
			got = append(got, r)
		}
	}
	want := serviceAccountRules
	if !on {
		want = nil
	}
	if !equalRules(got, want) {
		t.Errorf("%s grants %v; want %v", what, got, want)
	}
}

// serviceAccountsFlag is the value of the last --service-accounts of args,
// "" when none.
func serviceAccountsFlag(args []string) string {
	mode := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--service-accounts="); ok {
			mode = v
		}
	}
	return mode
}

// kustomized builds the kustomization dir and returns the rules of every
// Role and ClusterRole bound to the manager (manager-role) and the
// manager's arguments.
func kustomized(t *testing.T, dir string) ([]rbacv1.PolicyRule, []string) {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	var args []string
	for _, r := range res.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "Role", "ClusterRole":
			var role rbacv1.ClusterRole
			if err := sigsyaml.Unmarshal(b, &role); err != nil {
				t.Fatal(err)
			}
			rules = append(rules, role.Rules...)
		case "Deployment":
			var d struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Args []string `json:"args"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := sigsyaml.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			args = d.Spec.Template.Spec.Containers[0].Args
		}
	}
	if len(rules) == 0 || args == nil {
		t.Fatalf("%s gives no roles or no manager Deployment", dir)
	}
	return rules, args
}
