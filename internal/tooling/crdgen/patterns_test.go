package crdgen

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestChartConstraintsReachTheCRD checks that every pattern and length bound
// of the product charts' values.schema.json is in the generated CRD at the
// same place (a property, a map's values), so the API server refuses what
// Helm's schema check would, before the operator sees it; and that the CRD
// refuses, at each patterned field, a value holding a line break and a
// document separator after a prefix the pattern accepts.
func TestChartConstraintsReachTheCRD(t *testing.T) {
	for _, tt := range []struct {
		kind, dir string
		min       int // patterned fields the chart has at least
	}{
		{"Nginx", "../../../helm-charts/nginx", 7},
		{"Echo", "../../../helm-charts/echo", 3},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			w := loadWatch(t, tt.kind, tt.dir)
			crd, err := CRD(w)
			if err != nil {
				t.Fatal(err)
			}
			var schema map[string]any
			if err := json.Unmarshal(mustRead(t, filepath.Join(tt.dir, "values.schema.json")), &schema); err != nil {
				t.Fatal(err)
			}
			spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			var patterned []constrained
			collectConstraints(schema, &spec, nil, &patterned)
			if len(patterned) < tt.min {
				t.Fatalf("%d patterned fields found, want at least %d: %v", len(patterned), tt.min, patterned)
			}
			for _, c := range patterned {
				if c.crd == nil {
					t.Errorf("%s: no such field in the CRD", c.name())
					continue
				}
				if c.crd.Pattern != c.pattern {
					t.Errorf("%s: the CRD's pattern is %q, the chart's %q", c.name(), c.crd.Pattern, c.pattern)
				}
				if !sameBound(c.crd.MaxLength, c.schema["maxLength"]) || !sameBound(c.crd.MinLength, c.schema["minLength"]) {
					t.Errorf("%s: the CRD's lengths are %v..%v, the chart's %v..%v", c.name(),
						c.crd.MinLength, c.crd.MaxLength, c.schema["minLength"], c.schema["maxLength"])
				}
				for _, prefix := range []string{"x", "/", "/x", "1%", "a.b"} {
					// A short value, which only the pattern refuses, and a whole document.
					for _, value := range []string{prefix + "\nk: v", prefix + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: kube-system\n"} {
						obj := map[string]any{
							"apiVersion": "web.helmapp.io/v1alpha1", "kind": tt.kind,
							"metadata": map[string]any{"name": "web", "namespace": "default"},
							"spec":     c.place(value),
						}
						_, errs := admit(t, crd, obj)
						msg := errs.ToAggregate()
						if len(errs) == 0 || !strings.Contains(msg.Error(), "spec."+strings.ReplaceAll(c.name(), "*", "key")) {
							t.Errorf("%s = %q: the CRD admits it (errors %v)", c.name(), value, msg)
						} else if len(value) < 10 && !strings.Contains(msg.Error(), "should match") {
							t.Errorf("%s = %q: refused, but not by the pattern: %v", c.name(), value, msg)
						}
					}
				}
			}
		})
	}
}

// constrained is a string field of a chart's schema with a pattern.
type constrained struct {
	path    []string // property names; "*" for a map's values
	pattern string
	schema  map[string]any                   // the chart's node
	crd     *apiextensionsv1.JSONSchemaProps // the CRD's node, nil if missing
}

func (c constrained) name() string { return strings.Join(c.path, ".") }

// place returns the spec holding value at c's place.
func (c constrained) place(value string) map[string]any {
	var v any = value
	for i := len(c.path) - 1; i >= 0; i-- {
		k := c.path[i]
		if k == "*" {
			k = "key"
		}
		v = map[string]any{k: v}
	}
	return v.(map[string]any)
}

// collectConstraints walks a chart's schema node beside the CRD's and lists
// every string field with a pattern.
func collectConstraints(node map[string]any, crd *apiextensionsv1.JSONSchemaProps, path []string, out *[]constrained) {
	if p, ok := node["pattern"].(string); ok && isString(node) {
		*out = append(*out, constrained{path: append([]string(nil), path...), pattern: p, schema: node, crd: crd})
	}
	props, _ := node["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		var sub *apiextensionsv1.JSONSchemaProps
		if crd != nil {
			if s, ok := crd.Properties[k]; ok {
				sub = &s
			}
		}
		collectConstraints(props[k].(map[string]any), sub, append(path, k), out)
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		var sub *apiextensionsv1.JSONSchemaProps
		if crd != nil && crd.AdditionalProperties != nil {
			sub = crd.AdditionalProperties.Schema
		}
		collectConstraints(ap, sub, append(path, "*"), out)
	}
}

func isString(node map[string]any) bool {
	switch t := node["type"].(type) {
	case string:
		return t == "string"
	case []any:
		for _, e := range t {
			if e == "string" {
				return true
			}
		}
	}
	return false
}

func sameBound(crd *int64, chart any) bool {
	f, ok := chart.(float64)
	if !ok {
		return crd == nil
	}
	return crd != nil && float64(*crd) == f
}
