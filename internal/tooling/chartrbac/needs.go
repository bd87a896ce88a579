// Package chartrbac finds what a chart needs of the operator — the RBAC
// rules that let the operator install, upgrade, re-apply and uninstall its
// releases, and the scope (watches.yaml) of what its releases create beyond
// their own namespace — and writes those rules into config/rbac.
//
// Discover renders the chart as the operator would (Helm's own install,
// client only) with its defaults, then once for each boolean of its values
// flipped and each unset `enabled` flag set true, hooks included, and
// scans its templates for the kinds they name literally. Each kind is
// mapped to its resource and scope by a table of Kubernetes' own kinds
// (checked against a real kube-apiserver's discovery by the package's
// tests) and the chart's own CRDs. A kind it cannot map is reported, never
// guessed.
//
// The rules are least privilege: a chart's kind gets get, list, watch,
// create, patch and delete (what Helm, the operator's drift correction,
// its readiness and its dependent watches do with it; nothing replaces an
// object, so no update), namespaced kinds in the release's namespace
// (manager-role), cluster-scoped kinds and objects of other namespaces
// cluster-wide (manager-cluster-role). Roles the chart creates are handled
// by giving the operator their rules (see escalation in rules.go).
package chartrbac

import (
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// Needs is what one chart needs of the operator.
type Needs struct {
	Namespaced []rbacv1.PolicyRule // rules in the release's namespace (manager-role)
	Cluster    []rbacv1.PolicyRule // cluster-wide rules (manager-cluster-role)
	Scope      watches.Scope       // what its releases create beyond their own namespace (watches.yaml scope)
	Kinds      []Kind              // every kind found, with its resource, scope and where it was found
	Unresolved []string            // kinds it could not map to a resource, one line each
	Notes      []string            // what the author must check, one line each

	// NamespacedWhy and ClusterWhy say, rule by rule (same index as
	// Namespaced and Cluster), why the rule is there: which templates
	// create what. WriteRules writes them as the rules' comments.
	NamespacedWhy, ClusterWhy []string
	// CRDs are the kinds the chart's own CustomResourceDefinitions define
	// (crds/ and templates): known, so that an object of one of them
	// resolves, but not kinds the chart creates unless a render shows it.
	CRDs []Kind
}

// Kind is one kind the chart creates (or names in a template).
type Kind struct {
	Group, Version, Kind string
	// Resource is the kind's resource name; "" when it is unresolved.
	Resource   string
	Namespaced bool
	// Found says how it was found: "defaults", the first toggle of the
	// values that renders it ("values ingress.enabled=true"), "crds/", or
	// "template text" for a kind only a template names.
	Found string
	// Templates are the chart's templates that make it.
	Templates []string
	// Hook is true when a hook makes it.
	Hook bool
	// Namespaces are the namespaces, other than the release's, it is made
	// in ({{release}} and {{namespace}} where made from the release's).
	Namespaces []string
}

// String is "Deployment (apps/v1)".
func (k Kind) String() string {
	gv := k.Version
	if k.Group != "" {
		gv = k.Group + "/" + k.Version
	}
	return k.Kind + " (" + gv + ")"
}

// Discover finds what the chart needs: every kind it can create, with its
// resource and scope, the rules that lets the operator manage them, the
// scope of its releases, and what the author must check. A combination of
// values that does not render, the defaults included, is skipped with a
// note; an error is a chart that cannot be read (its values, its crds/).
func Discover(ch *chart.Chart) (*Needs, error) {
	if ch == nil || ch.Metadata == nil {
		return nil, fmt.Errorf("no chart")
	}
	d := &explorer{ch: ch, needs: &Needs{}, kinds: map[string]*Kind{}, inRelease: map[string]bool{}}
	if err := d.run(); err != nil {
		return nil, err
	}
	return d.needs, nil
}

// explorer is one Discover's state.
type explorer struct {
	ch      *chart.Chart
	needs   *Needs
	table   *kindTable
	renders []*render
	// crdFiles are the chart's crds/ files that hold CRDs.
	crdFiles []string
	// kinds by group/version/kind, in the order found (order).
	kinds map[string]*Kind
	order []string
	// firstSeen is the label of the first render of each role and binding.
	firstSeen map[string]string
	// inRelease holds the kinds made in the release's own namespace.
	inRelease map[string]bool
}

func (d *explorer) run() error {
	custom, err := d.chartCRDs()
	if err != nil {
		return err
	}
	r, err := newRenderer(d.ch, custom)
	if err != nil {
		return err
	}
	// A chart that needs a value set (required) does not render with its
	// defaults: its toggles and its templates' text still tell its kinds.
	if base, err := r.renderAs(probeRelease, "defaults", nil); err != nil {
		d.note("the chart does not render with its default values (%s): its kinds are found from its toggles and its templates' text only; a sample with its defaults will not install", firstLine(err.Error()))
	} else {
		d.renders = append(d.renders, base)
		// The usual fullname helper names objects after the release alone
		// when the release's name holds the chart's name: a second shape.
		if alt, err := r.renderAs(d.ch.Name()+altSuffix, "defaults", nil); err == nil {
			d.renders = append(d.renders, alt)
		}
	}
	ts, err := toggles(d.ch)
	if err != nil {
		return fmt.Errorf("chart %s: its values: %w", d.ch.Name(), err)
	}
	for _, t := range ts {
		rr, err := r.renderAs(probeRelease, t.label(), t.values())
		if err != nil {
			d.note("%s does not render (%s); what it would create is not counted", t.label(), firstLine(err.Error()))
			continue
		}
		d.renders = append(d.renders, rr)
	}
	// Kinds a template of CRDs renders are known too.
	for _, rr := range d.renders {
		for _, o := range rr.Objects {
			if o.Group == "apiextensions.k8s.io" && o.Kind == "CustomResourceDefinition" {
				custom = append(custom, crdKinds(o.u.Object)...)
			}
		}
	}
	d.table = newKindTable(custom)
	d.needs.CRDs = kindsOf(custom)

	for _, rr := range d.renders {
		for _, o := range rr.Objects {
			d.found(o, rr.Label)
		}
	}
	d.literals()
	d.rules()
	d.scope()
	return nil
}

// found records that object o was made under the render labelled label.
func (d *explorer) found(o object, label string) {
	key := gvkKey(o.Group, o.Version, o.Kind)
	k := d.kinds[key]
	if k == nil {
		k = &Kind{Group: o.Group, Version: o.Version, Kind: o.Kind, Found: label}
		if ak, why := d.table.lookup(o.Group, o.Version, o.Kind); why == "" {
			k.Resource, k.Namespaced = ak.Resource, ak.Namespaced
		} else {
			d.unresolved(o.Template + ": " + why)
		}
		d.kinds[key] = k
		d.order = append(d.order, key)
	}
	if o.Template != "" && !slices.Contains(k.Templates, o.Template) {
		k.Templates = append(k.Templates, o.Template)
		slices.Sort(k.Templates)
	}
	k.Hook = k.Hook || o.Hook
	if o.Namespace == "" || o.Namespace == probeNamespace {
		d.inRelease[key] = true
	}
	if ns := namePattern(o.Namespace, o.Release); k.Namespaced && o.Namespace != "" && o.Namespace != probeNamespace && !slices.Contains(k.Namespaces, ns) {
		k.Namespaces = append(k.Namespaces, ns)
		slices.Sort(k.Namespaces)
	}
}

// literals adds the kinds templates name that no render made.
func (d *explorer) literals() {
	for _, l := range literals(allTemplates(d.ch, "")) {
		if d.covered(l) {
			continue
		}
		group, version := l.Group, l.Version
		if !l.HasVersion {
			ak, ok := d.uniqueKind(l.Kind)
			if !ok {
				d.unresolved(fmt.Sprintf("%s: %s (its apiVersion is not literal, and no render made one): add its rule by hand if the chart can create it", l.Template, l.Kind))
				continue
			}
			group, version = ak.Group, ak.Version
		}
		d.found(object{Group: group, Version: version, Kind: l.Kind, Template: l.Template}, "template text")
	}
}

// covered says whether a render already made the literal's kind.
func (d *explorer) covered(l literal) bool {
	for _, k := range d.kinds {
		if k.Kind == l.Kind && (!l.HasVersion || (k.Group == l.Group && k.Version == l.Version)) {
			return true
		}
	}
	return false
}

// uniqueKind finds the one group serving kind (its preferred, last-listed
// version); false when none or several groups do.
func (d *explorer) uniqueKind(kind string) (apiKind, bool) {
	var found []apiKind
	groups := map[string]bool{}
	for _, k := range d.table.byGVK {
		if k.Kind == kind {
			found = append(found, k)
			groups[k.Group] = true
		}
	}
	if len(groups) != 1 {
		return apiKind{}, false
	}
	slices.SortFunc(found, func(a, b apiKind) int { return strings.Compare(a.Version, b.Version) })
	return found[len(found)-1], true
}

func (d *explorer) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(d.needs.Notes, n) {
		d.needs.Notes = append(d.needs.Notes, n)
	}
}

func (d *explorer) unresolved(line string) {
	if !slices.Contains(d.needs.Unresolved, line) {
		d.needs.Unresolved = append(d.needs.Unresolved, line)
	}
}

// kindList is the kinds found, in the order found.
func (d *explorer) kindList() []*Kind {
	out := make([]*Kind, 0, len(d.order))
	for _, key := range d.order {
		out = append(out, d.kinds[key])
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
