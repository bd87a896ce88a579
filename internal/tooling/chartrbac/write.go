package chartrbac

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// CR names the custom resource whose chart it is.
type CR struct {
	Group, Version, Kind, Plural string
	Chart                        string /* helm-charts/<name> */
	// SkipCRDs leaves out the rule that lets the operator apply the
	// chart's crds/: for a kind whose watch has crds.install: Skip because
	// the CRDs ship with the operator (config/crd, the bundle), where OLM
	// installs them. The operatorframework validators warn about a CSV
	// that may create CRDs.
	SkipCRDs bool
}

// The files WriteRules writes, relative to the project's root.
const (
	RolePath               = "config/rbac/role.yaml"
	ClusterRolePath        = "config/rbac/cluster_role.yaml"
	ClusterRoleBindingPath = "config/rbac/cluster_role_binding.yaml"
	TenancyRolePath        = "config/tenancy/role.yaml"
	rbacKustomizationPath  = "config/rbac/kustomization.yaml"
)

// scaffoldMarker is where a new kind's block goes: the end of the rules.
const scaffoldMarker = "#+kubebuilder:scaffold:rules"

func beginMarker(kind string) string { return "# +helmapp:chart:" + kind + ":begin" }
func endMarker(kind string) string   { return "# +helmapp:chart:" + kind + ":end" }

// WriteRules writes the kind's rules into the project at root, each file
// between the kind's markers (a block replaced where it is, a new one put
// before the scaffold marker): in config/rbac/role.yaml (manager-role) the
// custom resource's own rules and n.Namespaced; in
// config/rbac/cluster_role.yaml (manager-cluster-role, created with its
// binding and kustomization entries when missing) n.Cluster; in
// config/tenancy/role.yaml, when the project has it, the custom resource's
// rules and read-only rules on the chart's namespaced kinds. Writing the
// same input again changes no byte.
func WriteRules(root string, cr CR, n *Needs) error {
	if cr.Kind == "" || cr.Group == "" || cr.Plural == "" {
		return fmt.Errorf("chartrbac: the custom resource needs a group, kind and plural, got %+v", cr)
	}
	if n == nil {
		n = &Needs{}
	}
	if err := ensureClusterRole(root); err != nil {
		return err
	}
	nsRules := append(crRules(cr), describedRules(n.Namespaced, n.NamespacedWhy)...)
	cluster := describedRules(n.Cluster, n.ClusterWhy)
	if cr.SkipCRDs {
		cluster = slices.DeleteFunc(cluster, func(d described) bool { return strings.HasPrefix(d.why, crdsWhy) })
	}
	if err := writeBlock(filepath.Join(root, RolePath), cr.Kind, block(cr, "namespaced", nsRules)); err != nil {
		return err
	}
	var clBlock []string
	if len(cluster) > 0 {
		clBlock = block(cr, "cluster", cluster)
	}
	if err := writeBlock(filepath.Join(root, ClusterRolePath), cr.Kind, clBlock); err != nil {
		return err
	}
	tenancy := filepath.Join(root, TenancyRolePath)
	if _, err := os.Stat(tenancy); err == nil {
		return writeBlock(tenancy, cr.Kind, block(cr, "tenancy", append(crRules(cr), readOnly(n)...)))
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveRules takes the kind's blocks out of the RBAC files; a kind with
// none is no error. The files stay (manager-cluster-role with no rules
// grants nothing, and its empty clusterPermissions entry is dropped from
// the bundle).
func RemoveRules(root, kind string) error {
	for _, p := range []string{RolePath, ClusterRolePath, TenancyRolePath} {
		path := filepath.Join(root, p)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := writeBlock(path, kind, nil); err != nil {
			return err
		}
	}
	return nil
}

// described is a rule with why it exists.
type described struct {
	rule rbacv1.PolicyRule
	why  string
}

func describedRules(rules []rbacv1.PolicyRule, why []string) []described {
	out := make([]described, 0, len(rules))
	for i, r := range rules {
		w := "the chart needs it"
		if i < len(why) && why[i] != "" {
			w = why[i]
		}
		out = append(out, described{r, w})
	}
	return out
}

// crRules are the operator's rules on the custom resource itself.
func crRules(cr CR) []described {
	g := []string{cr.Group}
	return []described{
		{rbacv1.PolicyRule{APIGroups: g, Resources: []string{cr.Plural}, Verbs: []string{"get", "list", "watch", "patch"}},
			"Watch " + cr.Kind + " resources (the manager's informer cache: get/list/watch) and add/remove the uninstall finalizer with a merge patch. The operator never creates, replaces or deletes them; users do."},
		{rbacv1.PolicyRule{APIGroups: g, Resources: []string{cr.Plural + "/status"}, Verbs: []string{"patch"}},
			"Write their status (conditions, observedGeneration, release info): the status writer patches the status subresource and never replaces it."},
		{rbacv1.PolicyRule{APIGroups: g, Resources: []string{cr.Plural + "/finalizers"}, Verbs: []string{"update"}},
			"Released objects and release Secrets carry an ownerReference with blockOwnerDeletion=true to their resource; with the OwnerReferencesPermissionEnforcement admission plugin (on by default in OpenShift) setting it needs update on the owner's finalizers subresource."},
	}
}

// readOnly is what the tenancy variant grants on the chart's kinds: read
// only (readiness, drift, dependent watches); a ServiceAccount of the
// resource's namespace writes them.
func readOnly(n *Needs) []described {
	var out []described
	for i, r := range n.Namespaced {
		if !slices.Equal(r.Verbs, chartVerbs) {
			continue // a rule of the chart's roles, not one of its kinds
		}
		r = *r.DeepCopy()
		r.Verbs = []string{"get", "list", "watch"}
		why := "read only in this variant"
		if i < len(n.NamespacedWhy) {
			why = n.NamespacedWhy[i] + "; read only in this variant"
		}
		out = append(out, described{r, why})
	}
	return out
}

// escalationWhy marks the rules a chart's roles hold (rules.go).
const escalationWhy = "Kubernetes lets the operator create a role only with rules it holds itself"

// block is the kind's block: markers, a heading, and the rules each under
// its comment. which is "namespaced", "cluster" or "tenancy".
func block(cr CR, which string, rules []described) []string {
	out := []string{beginMarker(cr.Kind), "##"}
	head := fmt.Sprintf("%s (%s/%s), chart %s: written by `make chart` (internal/tooling/chartrbac) from what the chart creates; `make chart` rewrites it and `make chart-remove` takes it out, so change the chart, not these lines.", cr.Kind, cr.Group, cr.Version, cr.Chart)
	switch which {
	case "namespaced":
		head += " The chart's namespaced kinds get get, list, watch, create, patch and delete (see above)."
	case "cluster":
		head += " Cluster-scoped kinds, and namespaced ones the chart creates in other namespaces, get get, list, watch, create, patch and delete."
	}
	out = append(out, wrap(head, "## ")...)
	if slices.ContainsFunc(rules, func(d described) bool { return strings.Contains(d.why, escalationWhy) }) {
		out = append(out, "##")
		out = append(out, wrap("The chart creates roles. Kubernetes lets a user create a role, or bind one, only with the permissions it holds itself. The operator is given the rules of the chart's roles (below) rather than escalate or bind on roles: escalate on a role lets whoever controls the role's content (here anyone who may set a resource's values) grant anything, while included rules are a list a reviewer reads and the cluster enforces; holding every rule of the roles it binds, the operator needs no bind.", "## ")...)
	}
	out = append(out, "##")
	for _, d := range rules {
		out = append(out, wrap(d.why, "# ")...)
		out = append(out, ruleYAML(d.rule)...)
	}
	return append(out, endMarker(cr.Kind))
}

// ruleYAML is the rule as an item of a rules list.
func ruleYAML(r rbacv1.PolicyRule) []string {
	b, err := yaml.Marshal(r)
	if err != nil {
		panic(err) // a PolicyRule always marshals
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "- " + l
		} else {
			lines[i] = "  " + l
		}
	}
	return lines
}

// wrap breaks text into comment lines of at most 78 columns.
func wrap(text, prefix string) []string {
	var out []string
	line := prefix
	for _, w := range strings.Fields(text) {
		if len(line)+len(w) > 78 && line != prefix {
			out = append(out, strings.TrimRight(line, " "))
			line = prefix
		}
		line += w + " "
	}
	if line != prefix {
		out = append(out, strings.TrimRight(line, " "))
	}
	return out
}

// writeBlock replaces the kind's block in the file at path with lines (nil
// removes it), or puts it before the scaffold marker; it writes only when
// something changed.
func writeBlock(path, kind string, lines []string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(raw)
	all := strings.SplitAfter(text, "\n")
	begin, end := -1, -1
	for i, l := range all {
		switch strings.TrimRight(l, "\r\n") {
		case beginMarker(kind):
			begin = i
		case endMarker(kind):
			end = i
		}
	}
	var out []string
	switch {
	case begin >= 0 && end > begin:
		out = append(append(slices.Clone(all[:begin]), withNewlines(lines)...), all[end+1:]...)
	case begin >= 0 || end >= 0:
		return fmt.Errorf("%s: the markers of %s are broken (a begin without its end, or the other way round); mend them by hand", path, kind)
	case lines == nil:
		return nil
	default:
		at := slices.IndexFunc(all, func(l string) bool { return strings.TrimSpace(l) == scaffoldMarker })
		if at < 0 {
			return fmt.Errorf("%s has no %q line to put the rules of %s before", path, scaffoldMarker, kind)
		}
		out = append(append(slices.Clone(all[:at]), withNewlines(lines)...), all[at:]...)
	}
	next := strings.Join(out, "")
	if next == text {
		return nil
	}
	return os.WriteFile(path, []byte(next), 0o644)
}

func withNewlines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l + "\n"
	}
	return out
}
