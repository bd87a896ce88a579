package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/helmapp/helm-app-operator/internal/operator"
)

// TestEveryRBACRuleSaysWhy checks config/rbac: each rule of each Role and
// ClusterRole has a comment above it saying why it exists, and no rule uses
// a wildcard.
func TestEveryRBACRuleSaysWhy(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(repoRoot, "config", "rbac", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no config/rbac files: %v", err)
	}
	rules := 0
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := yaml.Parse(string(raw))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if k := nodes.GetKind(); k != "Role" && k != "ClusterRole" {
			continue
		}
		list, err := nodes.Pipe(yaml.Lookup("rules"))
		if err != nil || list == nil {
			t.Errorf("%s: no rules", p)
			continue
		}
		for i, rule := range list.YNode().Content {
			rules++
			if strings.TrimSpace(strings.TrimLeft(rule.HeadComment, "# ")) == "" {
				t.Errorf("%s: rule %d (line %d) has no comment saying why it exists", filepath.Base(p), i+1, rule.Line)
			}
			r := yaml.NewRNode(rule)
			for _, field := range []string{"apiGroups", "resources", "verbs"} {
				vals, _ := r.GetSlice(field)
				if slices.Contains(vals, any("*")) {
					t.Errorf("%s: rule %d grants %s \"*\"", filepath.Base(p), i+1, field)
				}
			}
		}
	}
	if rules == 0 {
		t.Error("found no rules at all")
	}
}

// TestLeaseRuleNamesTheLeaderElectionID checks the leader election rules the
// CSV carries: Leases may be created (a create cannot be limited to a name),
// but read and updated only under the name the manager's Deployment passes
// as --leader-election-id, which is also the operator's default. No other
// verb on Leases is granted.
func TestLeaseRuleNamesTheLeaderElectionID(t *testing.T) {
	opts, err := OptionsFromBundle(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	csv := generatedCSV(t, opts)
	st := csv.Spec.InstallStrategy.StrategySpec
	var id string
	for _, a := range st.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--leader-election-id="); ok {
			id = v
		}
	}
	if id != operator.DefaultLeaderElectionID {
		t.Errorf("the manager's --leader-election-id is %q, want the default %q", id, operator.DefaultLeaderElectionID)
	}
	var named, unnamed []string
	for _, p := range append(st.Permissions, st.ClusterPermissions...) {
		for _, r := range p.Rules {
			if !slices.Contains(r.Resources, "leases") {
				continue
			}
			verbs := strings.Join(r.Verbs, ",")
			if len(r.ResourceNames) == 0 {
				unnamed = append(unnamed, verbs)
			} else if slices.Equal(r.ResourceNames, []string{id}) {
				named = append(named, verbs)
			} else {
				t.Errorf("a Lease rule names %v, not the leader election ID %q", r.ResourceNames, id)
			}
		}
	}
	if !slices.Equal(unnamed, []string{"create"}) || !slices.Equal(named, []string{"get,update"}) {
		t.Errorf("Lease rules: unnamed %v, named %v; want [create] and [get,update] on %s", unnamed, named, id)
	}
}

// generatedCSV generates the bundle of opts into a temporary directory and
// reads its ClusterServiceVersion back.
func generatedCSV(t *testing.T, opts Options) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	_, _, csv := generated(t, opts)
	return csv
}

// generated generates the bundle of opts, writes it into a temporary
// directory dir and reads its ClusterServiceVersion back.
func generated(t *testing.T, opts Options) (files Files, dir string, csv *v1alpha1.ClusterServiceVersion) {
	t.Helper()
	files, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	if csv, err = ReadCSV(dir); err != nil {
		t.Fatal(err)
	}
	return files, dir, csv
}
