package chartrbac

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// chartCRDs reads the CustomResourceDefinitions of the chart's crds/ (its
// subcharts' included, as the operator applies them: internal/release's
// applyCRDs) and returns the kinds they define. It records the files, for
// the rule that lets the operator apply them.
func (d *explorer) chartCRDs() ([]apiKind, error) {
	var out []apiKind
	for _, c := range d.ch.CRDObjects() {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(c.File.Data), 4096)
		for {
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("chart %s: %s: %w", d.ch.Name(), c.Filename, err)
			}
			if (&unstructured.Unstructured{Object: m}).GetKind() != "CustomResourceDefinition" {
				continue
			}
			out = append(out, crdKinds(m)...)
			if !slices.Contains(d.crdFiles, c.Name) {
				d.crdFiles = append(d.crdFiles, c.Name)
			}
		}
	}
	return out, nil
}

// crdKinds are the kinds a CustomResourceDefinition (apiextensions.k8s.io/v1)
// defines: one per served version.
func crdKinds(m map[string]any) []apiKind {
	group, _, _ := unstructured.NestedString(m, "spec", "group")
	kind, _, _ := unstructured.NestedString(m, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(m, "spec", "names", "plural")
	scope, _, _ := unstructured.NestedString(m, "spec", "scope")
	versions, _, _ := unstructured.NestedSlice(m, "spec", "versions")
	var out []apiKind
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		name, _ := vm["name"].(string)
		if served, ok := vm["served"].(bool); name == "" || (ok && !served) {
			continue
		}
		out = append(out, apiKind{Group: group, Version: name, Kind: kind, Resource: plural, Namespaced: scope != "Cluster"})
	}
	return out
}

// kindsOf lists custom kinds as Kinds, one per group/version/kind.
func kindsOf(ks []apiKind) []Kind {
	var out []Kind
	seen := map[string]bool{}
	for _, k := range ks {
		key := gvkKey(k.Group, k.Version, k.Kind)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Kind{Group: k.Group, Version: k.Version, Kind: k.Kind, Resource: k.Resource, Namespaced: k.Namespaced, Found: "CRD"})
	}
	return out
}
