package chartrbac

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// namePattern is name as a scope pattern: the release's name and namespace
// it holds become {{release}} and {{namespace}}; a fixed name stays as it is.
func namePattern(name, release string) string {
	if name == "" {
		return "*"
	}
	p := strings.ReplaceAll(name, release, watches.NameRelease)
	return strings.ReplaceAll(p, probeNamespace, watches.NameNamespace)
}

// leftover says whether a pattern still holds part of the probe names:
// the chart cut or changed the release's name or namespace (trunc, upper),
// so the pattern would not match another release's object.
func leftover(p string) bool {
	return strings.Contains(p, "x7q") || strings.Contains(p, "y8w")
}

// scope is what the renders create outside the release's namespace:
// cluster-scoped objects, and namespaced ones in other namespaces, with
// their names as patterns (watches.yaml scope).
func (d *explorer) scope() {
	type key struct{ group, kind, ns string }
	names := map[key][]string{}
	fixed := []string{}
	for _, rr := range d.renders {
		for _, o := range rr.Objects {
			k := d.kinds[gvkKey(o.Group, o.Version, o.Kind)]
			if k == nil || k.Resource == "" {
				continue
			}
			if k.Namespaced && (o.Namespace == "" || o.Namespace == probeNamespace) {
				continue
			}
			ns := ""
			if k.Namespaced {
				ns = o.Namespace
				if leftover(namePattern(ns, o.Release)) || strings.Contains(namePattern(ns, o.Release), "{{") {
					d.note("%s %s (%s) is created in namespace %s, made from the release's name or namespace: a scope names fixed namespaces only; allow it by hand", k.Kind, namePattern(o.Name, o.Release), o.Template, namePattern(ns, o.Release))
					continue
				}
			}
			p := namePattern(o.Name, o.Release)
			if leftover(p) {
				d.note("%s %s (%s): its name is made from part of the release's name; the scope allows every name of the kind (\"*\"); narrow it by hand", k.Kind, p, o.Template)
				p = "*"
			}
			kk := key{o.Group, o.Kind, ns}
			if !slices.Contains(names[kk], p) {
				names[kk] = append(names[kk], p)
			}
			if !strings.Contains(p, watches.NameNamespace) {
				fixed = append(fixed, k.Kind+" "+p)
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(names), func(a, b key) int {
		return strings.Compare(a.group+"/"+a.kind+"/"+a.ns, b.group+"/"+b.kind+"/"+b.ns)
	})
	for _, k := range keys {
		ns := slices.Sorted(slices.Values(names[k]))
		if k.ns == "" {
			d.needs.Scope.ClusterScoped = append(d.needs.Scope.ClusterScoped, watches.ScopeRule{Group: k.group, Kind: k.kind, Names: ns})
		} else {
			d.needs.Scope.Namespaces = append(d.needs.Scope.Namespaces, watches.ScopeRule{Group: k.group, Kind: k.kind, Namespaces: []string{k.ns}, Names: ns})
		}
	}
	if len(fixed) > 0 {
		slices.Sort(fixed)
		fixed = slices.Compact(fixed)
		if len(fixed) > 4 {
			fixed = append(fixed[:4], fmt.Sprintf("and %d more", len(fixed)-4))
		}
		d.note("its releases create objects outside their namespace whose names hold no {{namespace}} (%s): two installs of the operator would fight over them, so the bundle offers the AllNamespaces install mode only", strings.Join(fixed, ", "))
	}
}
