package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// chartKinds are the resources the charts create (config/rbac/role.yaml's
// last section).
var chartKinds = []string{"deployments", "services", "configmaps", "serviceaccounts", "ingresses", "horizontalpodautoscalers", "poddisruptionbudgets"}

func readRules(t *testing.T, p string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, p))
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.ClusterRole
	if err := sigsyaml.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != "manager-role" {
		t.Errorf("%s names %q, want manager-role", p, r.Name)
	}
	return r.Rules
}

func onChartKinds(r rbacv1.PolicyRule) bool {
	for _, res := range r.Resources {
		if slices.Contains(chartKinds, res) {
			return true
		}
	}
	return false
}

// TestTenancyRoleOnlyReadsTheChartsKinds checks config/tenancy/role.yaml
// against config/rbac/role.yaml: the same rules but for the charts' kinds,
// which it may only get, list and watch, and the rules of per-resource
// ServiceAccounts (impersonate on serviceaccounts, get on namespaces), which
// only it has.
func TestTenancyRoleOnlyReadsTheChartsKinds(t *testing.T) {
	full := readRules(t, "config/rbac/role.yaml")
	tenancy := readRules(t, "config/tenancy/role.yaml")
	var fullOwn, tenancyOwn, tenancySA []rbacv1.PolicyRule
	for _, r := range full {
		if serviceAccountRule(r) {
			t.Errorf("config/rbac/role.yaml grants %v on %v, which only the ServiceAccount variants may", r.Verbs, r.Resources)
		}
		if !onChartKinds(r) {
			fullOwn = append(fullOwn, r)
		}
	}
	readable := map[string]bool{}
	for _, r := range tenancy {
		switch {
		case serviceAccountRule(r):
			tenancySA = append(tenancySA, r)
			continue
		case !onChartKinds(r):
			tenancyOwn = append(tenancyOwn, r)
			continue
		}
		for _, v := range r.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("the tenancy Role may %s %v", v, r.Resources)
			}
		}
		for _, res := range r.Resources {
			readable[res] = true
		}
	}
	for _, k := range chartKinds {
		if !readable[k] {
			t.Errorf("the tenancy Role may not read %s (readiness, drift, dependent watches need it)", k)
		}
	}
	if !equalRules(fullOwn, tenancyOwn) {
		t.Errorf("the operator's own rules differ between the Roles:\nconfig/rbac:    %v\nconfig/tenancy: %v", fullOwn, tenancyOwn)
	}
	if !equalRules(tenancySA, serviceAccountRules) {
		t.Errorf("the tenancy Role's ServiceAccount rules are %v, want %v", tenancySA, serviceAccountRules)
	}

	// config/tenancy's kustomization is config/default with that Role.
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "config", "tenancy"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.Resources() {
		if r.GetKind() != "ClusterRole" || r.GetName() != "helm-app-operator-manager-role" {
			continue
		}
		found = true
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var got rbacv1.ClusterRole
		if err := sigsyaml.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !equalRules(got.Rules, tenancy) {
			t.Errorf("kustomize build config/tenancy gives the manager-role rules %v", got.Rules)
		}
	}
	if !found {
		t.Error("kustomize build config/tenancy has no helm-app-operator-manager-role")
	}

	// The bundle's tenancy variant: no write of a chart kind anywhere.
	opts, err := OptionsFromBundle(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	opts.Variant = VariantTenancy
	csv := generatedCSV(t, opts)
	st := csv.Spec.InstallStrategy.StrategySpec
	for _, p := range append(st.Permissions, st.ClusterPermissions...) {
		for _, r := range p.Rules {
			if onChartKinds(r) && slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "create" || v == "patch" || v == "update" || v == "delete" }) {
				t.Errorf("the tenancy CSV lets the operator %v %v", r.Verbs, r.Resources)
			}
		}
	}
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool {
		return slices.Equal(x.APIGroups, y.APIGroups) && slices.Equal(x.Resources, y.Resources) &&
			slices.Equal(x.Verbs, y.Verbs) && slices.Equal(x.ResourceNames, y.ResourceNames)
	})
}
