package watches

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Scope, our extension (scope: {clusterScoped, namespaces}), is what a
// watch's releases may create beyond the namespaced objects of their own
// namespace, which is all they may create without it (docs/tenancy.md, "A
// boundary that holds without lockdown"). The operator refuses any
// manifest, rendered or read back from Helm's storage, with an object
// outside it (status reason OutOfScope).
type Scope struct {
	// ClusterScoped are the cluster-scoped objects a release may create.
	ClusterScoped []ScopeRule
	// Namespaces are the namespaced objects a release may create in
	// namespaces other than its own.
	Namespaces []ScopeRule
}

// ScopeRule allows the objects of one kind whose name matches one of
// Names (and, in Scope.Namespaces, whose namespace is one of Namespaces).
type ScopeRule struct {
	Group      string   `json:"group"`
	Kind       string   `json:"kind"`
	Namespaces []string `json:"namespaces,omitempty"`
	Names      []string `json:"names"`
}

// scopeEntry is the scope field of an entry.
type scopeEntry struct {
	ClusterScoped []ScopeRule `json:"clusterScoped,omitempty"`
	Namespaces    []ScopeRule `json:"namespaces,omitempty"`
}

// Name patterns of a scope rule: "*" matches any run of characters, and
// these placeholders the release's name and namespace.
const (
	NameRelease   = "{{release}}"
	NameNamespace = "{{namespace}}"
)

// checkScope validates the scope field of the entry name.
func checkScope(name string, s *scopeEntry) error {
	if s == nil {
		return nil
	}
	for i, r := range s.ClusterScoped {
		field := fmt.Sprintf("scope.clusterScoped[%d]", i)
		if len(r.Namespaces) > 0 {
			return fmt.Errorf("%s: field %s.namespaces: a cluster-scoped object has no namespace; list namespaced kinds under scope.namespaces", name, field)
		}
		if err := checkRule(name, field, r); err != nil {
			return err
		}
	}
	for i, r := range s.Namespaces {
		field := fmt.Sprintf("scope.namespaces[%d]", i)
		if len(r.Namespaces) == 0 {
			return fmt.Errorf("%s: field %s.namespaces is required: the namespaces, besides the release's own, that objects of kind %s may be created in", name, field, r.Kind)
		}
		for _, ns := range r.Namespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("%s: field %s.namespaces must name namespaces, got %q: %s", name, field, ns, errs[0])
			}
		}
		if err := checkRule(name, field, r); err != nil {
			return err
		}
	}
	return nil
}

// checkRule checks the kind and the name patterns of the rule at field.
func checkRule(name, field string, r ScopeRule) error {
	if r.Kind == "" {
		return fmt.Errorf("%s: field %s.kind is required", name, field)
	}
	if strings.Contains(r.Group, "/") {
		return fmt.Errorf("%s: field %s.group is an API group without its version, got %q", name, field, r.Group)
	}
	if len(r.Names) == 0 {
		return fmt.Errorf("%s: field %s.names is required: name patterns such as %q (\"*\" alone allows every name)", name, field, NameRelease+"-*")
	}
	for _, p := range r.Names {
		rest := strings.ReplaceAll(strings.ReplaceAll(p, NameRelease, ""), NameNamespace, "")
		switch {
		case p == "":
			return fmt.Errorf("%s: field %s.names has an empty pattern", name, field)
		case strings.ContainsAny(rest, "{}"):
			return fmt.Errorf("%s: field %s.names: pattern %q may use only the placeholders %s and %s", name, field, p, NameRelease, NameNamespace)
		case strings.ContainsAny(rest, " \t\n/"):
			return fmt.Errorf("%s: field %s.names: pattern %q cannot match an object name", name, field, p)
		}
	}
	return nil
}

// scopeOf is the scope of a checked scope field.
func scopeOf(s *scopeEntry) Scope {
	if s == nil {
		return Scope{}
	}
	return Scope{ClusterScoped: s.ClusterScoped, Namespaces: s.Namespaces}
}
