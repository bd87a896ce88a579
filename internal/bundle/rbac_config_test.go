package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"
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
