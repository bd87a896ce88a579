package chartrbac

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// crdsWhy starts the reason of the rule for the chart's crds/.
const crdsWhy = "the chart's crds/"

// chartVerbs are the verbs on a kind a chart creates: Helm installs its
// objects (create), reads them for conflicts and three-way merges (get),
// patches them on upgrade and when the operator corrects drift (patch),
// deletes them on uninstall or when an upgrade drops them (delete);
// internal/readiness reads each (get) and internal/dependents lists and
// watches their metadata for watchDependentResources (list, watch).
// Nothing replaces an object (no update).
var chartVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}

// crdVerbs are the verbs on customresourcedefinitions for a chart's crds/,
// which the operator applies itself (internal/release/crds.go): it creates
// the missing ones (create) and waits for them to be Established through
// the manager's cached client (get, and list and watch for its informer).
// It never deletes a CRD. crds.upgrade: CreateReplace also patches them.
var crdVerbs = []string{"get", "list", "watch", "create"}

// ruleSet is the rules of one role being built, each with why it is there.
type ruleSet struct {
	rules []rbacv1.PolicyRule
	why   []string
}

// add appends rule, or, when an equal rule is there, adds why to it.
func (s *ruleSet) add(rule rbacv1.PolicyRule, why string) {
	for i, r := range s.rules {
		if reflect.DeepEqual(r, rule) {
			if !strings.Contains(s.why[i], why) {
				s.why[i] += "; " + why
			}
			return
		}
	}
	s.rules = append(s.rules, rule)
	s.why = append(s.why, why)
}

// rules computes the Namespaced and Cluster rules of the kinds found, the
// chart's crds/, and the chart's own roles.
func (d *explorer) rules() {
	var ns, cl ruleSet
	d.kindRules(&ns, &cl)
	if len(d.crdFiles) > 0 {
		cl.add(rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: slices.Clone(crdVerbs)},
			crdsWhy+" ("+strings.Join(d.crdFiles, ", ")+"), which the operator applies before an install and never deletes")
		d.note("the chart's crds/ need create on CustomResourceDefinitions, which the operatorframework bundle validators warn about (an operator that installs other operators); `make chart ... CRDS=bundle` ships them with the operator instead (config/crd/charts/<kind>, watches.yaml crds.install: Skip, CR.SkipCRDs) for a bundle without that warning")
	}
	d.escalation(&ns, &cl)
	d.lookupRules(&ns, &cl)
	d.noteCRDCreation(&cl)
	d.needs.Namespaced, d.needs.NamespacedWhy = ns.rules, ns.why
	d.needs.Cluster, d.needs.ClusterWhy = cl.rules, cl.why
	for _, k := range d.kindList() {
		d.needs.Kinds = append(d.needs.Kinds, *k)
	}
}

// noteCRDCreation notes a rule beyond the one for crds/ that lets the
// operator create CRDs (a role of the chart that does): the bundle's
// validators will warn about it whatever the kind's crds policy.
func (d *explorer) noteCRDCreation(cl *ruleSet) {
	for i, r := range cl.rules {
		if strings.HasPrefix(cl.why[i], crdsWhy) {
			continue
		}
		if (slices.Contains(r.APIGroups, "apiextensions.k8s.io") || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, "customresourcedefinitions") || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "*")) {
			d.note("the chart creates CustomResourceDefinitions beyond its crds/ (%s): its bundle will carry the operatorframework validators' warning about an operator that may create CRDs", cl.why[i])
			return
		}
	}
}

// kindRules gives each resolved kind the chart verbs, one rule per API
// group and role: namespaced kinds made in the release's namespace in
// Namespaced; cluster-scoped kinds, and namespaced ones made in other
// namespaces, in Cluster.
func (d *explorer) kindRules(ns, cl *ruleSet) {
	type bucket struct {
		resources []string
		why       []string
	}
	nsGroups, clGroups := map[string]*bucket{}, map[string]*bucket{}
	put := func(m map[string]*bucket, k *Kind, why string) {
		b := m[k.Group]
		if b == nil {
			b = &bucket{}
			m[k.Group] = b
		}
		if !slices.Contains(b.resources, k.Resource) {
			b.resources = append(b.resources, k.Resource)
		}
		b.why = append(b.why, why)
	}
	for _, k := range d.kindList() {
		if k.Resource == "" {
			continue
		}
		why := k.String() + ": " + strings.Join(k.Templates, ", ")
		switch {
		case k.Found == "template text":
			why += " (named in the template; no render made one)"
		case k.Found != "defaults":
			why += " (with " + k.Found + ")"
		}
		if k.Hook {
			why += ", a hook"
		}
		if !k.Namespaced {
			put(clGroups, k, why)
			continue
		}
		if d.inRelease[gvkKey(k.Group, k.Version, k.Kind)] {
			put(nsGroups, k, why)
		}
		if len(k.Namespaces) > 0 {
			put(clGroups, k, why+" in namespace "+strings.Join(k.Namespaces, ", "))
			d.note("%s is created in namespace %s, outside the release's: its rule is cluster-wide (manager-cluster-role), as RBAC cannot grant in a namespace the operator does not watch", k, strings.Join(k.Namespaces, ", "))
		}
	}
	for _, pair := range []struct {
		m   map[string]*bucket
		set *ruleSet
	}{{nsGroups, ns}, {clGroups, cl}} {
		for _, g := range slices.Sorted(maps.Keys(pair.m)) {
			b := pair.m[g]
			slices.Sort(b.resources)
			slices.Sort(b.why)
			pair.set.add(rbacv1.PolicyRule{APIGroups: []string{g}, Resources: b.resources, Verbs: slices.Clone(chartVerbs)}, strings.Join(b.why, "; "))
		}
	}
}

// escalation gives the operator the rules of every Role and ClusterRole
// the chart creates. Kubernetes lets a user create or update a role only
// with permissions it holds itself (or with the escalate verb on roles),
// and bind a role only when it holds the role's permissions (or with the
// bind verb). The rules are included rather than escalate or bind: escalate
// on a role lets whoever controls the role's content — here the values of
// any resource of the kind — grant anything, while included rules are a
// list a reviewer reads and the cluster enforces. Holding every rule of
// the roles it binds, the operator needs no bind for them; a binding to a
// role the chart does not create (a fixed name such as
// system:auth-delegator) gets bind on that name alone.
func (d *explorer) escalation(ns, cl *ruleSet) {
	for _, rr := range d.renders {
		rendered := map[string]bool{}
		for _, o := range rr.Objects {
			if o.Group == rbacv1.GroupName && (o.Kind == "Role" || o.Kind == "ClusterRole") {
				rendered[roleKey(o.Kind, o.Namespace, o.Name)] = true
			}
		}
		for _, o := range rr.Objects {
			if o.Group != rbacv1.GroupName {
				continue
			}
			switch o.Kind {
			case "Role", "ClusterRole":
				d.roleRules(o, d.firstLabel(o, rr.Label), ns, cl)
			case "RoleBinding", "ClusterRoleBinding":
				d.bindRule(o, d.firstLabel(o, rr.Label), rendered, ns, cl)
			}
		}
	}
}

// firstLabel is the label of the first render that made an object like o
// (same kind, same name pattern): "" for the defaults, else " (with values
// ...)" to say when the chart makes it.
func (d *explorer) firstLabel(o object, label string) string {
	key := o.Kind + "/" + namePattern(o.Name, o.Release)
	if d.firstSeen == nil {
		d.firstSeen = map[string]string{}
	}
	if l, ok := d.firstSeen[key]; ok {
		return l
	}
	l := ""
	if label != "defaults" {
		l = " (with " + label + ")"
	}
	d.firstSeen[key] = l
	return l
}

// roleRules adds the rules of the Role or ClusterRole o, which the chart
// makes under when.
func (d *explorer) roleRules(o object, when string, ns, cl *ruleSet) {
	var role rbacv1.ClusterRole // a Role's rules have the same shape
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.u.Object, &role); err != nil {
		d.note("%s %s (%s) does not read as a role: %v", o.Kind, o.Name, o.Template, err)
		return
	}
	name := namePattern(o.Name, o.Release)
	set, where := cl, "cluster-wide"
	if o.Kind == "Role" && (o.Namespace == "" || o.Namespace == probeNamespace) {
		set, where = ns, "in the release's namespace"
	} else if o.Kind == "Role" {
		d.note("Role %s is created in namespace %s: the operator holds its rules cluster-wide (manager-cluster-role)", name, o.Namespace)
	}
	why := fmt.Sprintf("the rules of %s %s (%s%s), held %s because %s", o.Kind, name, o.Template, when, where, escalationWhy)
	if role.AggregationRule != nil {
		// The cluster computes such a role's rules, and Kubernetes lets
		// only a user with escalate on clusterroles create one; a create
		// names no object, so escalate limited to the role's name does not
		// do (TestAggregatedClusterRole). Escalate on every ClusterRole
		// would let the operator write any role: not a grant to write
		// unasked.
		d.unresolved(fmt.Sprintf("%s: ClusterRole %s%s has an aggregationRule: creating it needs escalate on every ClusterRole (cluster-admin in all but name); no rule written, grant it by hand if you accept that or turn the role off in the values", o.Template, name, when))
	}
	for _, r := range role.Rules {
		r = *r.DeepCopy()
		if len(r.ResourceNames) > 0 {
			var named []string
			for _, n := range r.ResourceNames {
				named = append(named, namePattern(n, o.Release))
			}
			if !slices.Equal(named, r.ResourceNames) {
				d.note("%s %s (%s) grants on resourceNames made from the release's name (%s): the operator's rule cannot name them, so it holds it on every name", o.Kind, name, o.Template, strings.Join(named, ", "))
				r.ResourceNames = nil
			}
		}
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") || slices.Contains(r.NonResourceURLs, "*") {
			d.note("%s %s (%s) grants a wildcard (%s): the operator must hold it too to create the role; review it", o.Kind, name, o.Template, ruleString(r))
		}
		set.add(r, why)
	}
}

// bindRule adds bind on a role a binding of the chart refers to that the
// same render does not create.
func (d *explorer) bindRule(o object, when string, rendered map[string]bool, ns, cl *ruleSet) {
	var b rbacv1.RoleBinding // a ClusterRoleBinding has the same roleRef
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.u.Object, &b); err != nil {
		d.note("%s %s (%s) does not read as a binding: %v", o.Kind, o.Name, o.Template, err)
		return
	}
	if rendered[roleKey(b.RoleRef.Kind, o.Namespace, b.RoleRef.Name)] {
		return
	}
	ref := namePattern(b.RoleRef.Name, o.Release)
	if ref != b.RoleRef.Name {
		d.note("%s %s (%s) binds %s %s, which the chart does not create: add a rule for binding it by hand", o.Kind, namePattern(o.Name, o.Release), o.Template, b.RoleRef.Kind, ref)
		return
	}
	resource := "clusterroles"
	set := cl
	if b.RoleRef.Kind == "Role" {
		resource = "roles"
		if o.Namespace != "" && o.Namespace != probeNamespace {
			set = cl
		} else {
			set = ns
		}
	}
	set.add(rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{resource}, Verbs: []string{"bind"}, ResourceNames: []string{b.RoleRef.Name}},
		fmt.Sprintf("%s %s (%s%s) binds %s %s, which the chart does not create then: bind on that name alone, as its rules are not the chart's to list", o.Kind, namePattern(o.Name, o.Release), o.Template, when, b.RoleRef.Kind, b.RoleRef.Name))
	d.note("%s %s (%s%s) binds %s %s, which the chart does not create then: the operator gets bind on that name", o.Kind, namePattern(o.Name, o.Release), o.Template, when, b.RoleRef.Kind, b.RoleRef.Name)
}

// roleKey names a role: a Role by namespace and name ("" is the
// release's), a ClusterRole by name (a namespace a template sets on one
// means nothing).
func roleKey(kind, ns, name string) string {
	if kind != "Role" {
		ns = ""
	} else if ns == probeNamespace {
		ns = ""
	}
	return kind + "/" + ns + "/" + name
}

func ruleString(r rbacv1.PolicyRule) string {
	s := fmt.Sprintf("apiGroups %v resources %v verbs %v", r.APIGroups, r.Resources, r.Verbs)
	if len(r.NonResourceURLs) > 0 {
		s += fmt.Sprintf(" nonResourceURLs %v", r.NonResourceURLs)
	}
	return s
}

// lookupRules lets the operator read what the templates' lookup calls
// read: Helm runs them as the operator when it renders a release (a
// client-only render returns nothing, so no render shows them). A call for
// one named object gets get on that name alone; one with an empty name
// lists. A call in the release's namespace goes in Namespaced, one in a
// named namespace or across namespaces ("") in Cluster. A call whose
// arguments are not literal is a note.
func (d *explorer) lookupRules(ns, cl *ruleSet) {
	for _, c := range lookups(allTemplates(d.ch, "")) {
		if !c.Literal {
			d.unresolved(fmt.Sprintf("%s: a lookup whose arguments are not literal: add a rule to read what it reads by hand", c.Template))
			continue
		}
		group, version, found := strings.Cut(c.APIVersion, "/")
		if !found {
			group, version = "", c.APIVersion
		}
		ak, why := d.table.lookup(group, version, c.Kind)
		if why != "" {
			d.unresolved(c.Template + ": lookup of " + why)
			continue
		}
		r := rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{ak.Resource}, Verbs: []string{"get"}, ResourceNames: []string{c.Name}}
		if c.Name == "" {
			r.Verbs, r.ResourceNames = []string{"list"}, nil
		}
		where := "namespace " + c.Namespace
		set := cl
		switch {
		case !ak.Namespaced:
			where = "the cluster"
		case c.ReleaseNamespace:
			set, where = ns, "the release's namespace"
		case c.Namespace == "":
			where = "every namespace"
		}
		what := fmt.Sprintf("%s %q", c.Kind, c.Name)
		if c.Name == "" {
			what = c.Kind + "s"
		}
		set.add(r, fmt.Sprintf("%s looks up %s in %s (Helm's lookup runs as the operator when it renders the release)", c.Template, what, where))
		if set == cl && ak.Namespaced {
			d.note("%s looks up %s in %s: the operator reads it cluster-wide (manager-cluster-role)", c.Template, what, where)
		}
	}
}
