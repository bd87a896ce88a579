package crdgen

import (
	"strings"
	"testing"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// paritySchema uses, at once, the constructs of real charts' schemas that a
// structural schema cannot say as such. (A remote $ref is left out: Helm
// would fetch it.)
const paritySchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "definitions": {
    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
    "tree": {"type": "object", "properties": {"child": {"$ref": "#/definitions/tree"}}}
  },
  "properties": {
    "config": {"type": ["object", "string"], "properties": {"a": {"type": "integer"}}},
    "maybe": {"type": ["string", "null"]},
    "size": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}]},
    "mode": {"anyOf": [{"type": "boolean"}, {"type": "string", "enum": ["auto"]}]},
    "port": {"allOf": [{"$ref": "#/definitions/port"}, {"maximum": 1024}]},
    "tree": {"$ref": "#/definitions/tree"},
    "labels": {"type": "object", "patternProperties": {"^[a-z]+$": {"type": "string"}}},
    "env": {"type": "object", "additionalProperties": false, "patternProperties": {"^[A-Z_]+$": {"type": "string"}}},
    "mixed": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
    "exclusive": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    "cond": {"type": "object", "if": {"required": ["tls"]}, "then": {"required": ["cert"]}},
    "notEmpty": {"type": "string", "not": {"const": ""}},
    "version": {"type": "string", "oneOf": [{"pattern": "^v"}, {"pattern": "^[0-9]"}]}
  }
}`

// parityValues are values Helm's own check accepts or refuses.
var parityValues = []string{
	"config: {a: 1}", "config: text", "config: {b: x}",
	"maybe: x", "maybe: null",
	"size: 3", "size: 50%", "size: -1", "size: half",
	"mode: true", "mode: auto", "mode: off",
	"port: 80", "port: 8080", "port: 0",
	"tree: {child: {child: {child: {}}}}", "tree: {child: 1}",
	"labels: {app: web}", "labels: {App: 1}", "labels: {app: 1}",
	"env: {HOME: /root}", "env: {home: x}", "env: {HOME: 1}",
	"mixed: {a: x, b: 1}", "mixed: {a: x, b: y}",
	"pair: [a, 1]", "pair: [1, a]",
	"exclusive: {a: 1}", "exclusive: {a: 1, b: 2}", "exclusive: {}",
	"cond: {tls: true, cert: x}", "cond: {tls: true}",
	"notEmpty: x", "notEmpty: ''",
	"version: v1", "version: '1.2'", "version: x",
}

// TestDegradedSchemaAcceptsWhatHelmAccepts checks the converter's one rule
// against Helm itself: every values document Helm's validator accepts is
// admitted by the CRD with nothing pruned; the CRD may refuse less than Helm
// (what it could not represent, noted), never more.
func TestDegradedSchemaAcceptsWhatHelmAccepts(t *testing.T) {
	w := watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"},
		Chart:            &chart.Chart{Metadata: &chart.Metadata{Name: "thing", Version: "1.0.0"}, Schema: []byte(paritySchema)},
	}
	crd, err := CRD(w)
	if err != nil {
		t.Fatal(err)
	}
	if errs := validateCRD(t, crd); len(errs) > 0 {
		t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
	}
	notes, err := SpecNotes(w.Chart)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"values.config:", "values.tree.child:", "values.labels:", "values.env:", "values.mixed:",
		"values.pair:", "values.exclusive:", "values.cond:", "values.notEmpty:", "values.version:"} {
		if !strings.Contains(strings.Join(notes, "\n"), want) {
			t.Errorf("no note for %s in:\n%s", want, strings.Join(notes, "\n"))
		}
	}
	helmAccepts, crdRefuses := 0, 0
	for _, doc := range parityValues {
		values := fromYAML(t, doc)
		helmErr := chartutil.ValidateAgainstSingleSchema(values, []byte(paritySchema))
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "x", "namespace": "default"}, "spec": jsonCopy(t, values)}
		unknown, errs := admit(t, crd, obj)
		switch {
		case helmErr == nil && (len(errs) > 0 || len(unknown) > 0):
			t.Errorf("%s: Helm accepts it, the CRD does not: errors %v, pruned %v", doc, errs.ToAggregate(), unknown)
		case helmErr == nil:
			helmAccepts++
		case len(errs) > 0:
			crdRefuses++
		}
	}
	// Both sides of the comparison must have been exercised.
	if helmAccepts < 15 || crdRefuses < 5 {
		t.Errorf("Helm accepted %d documents and the CRD refused %d of the others; the cases test too little", helmAccepts, crdRefuses)
	}
	t.Logf("%d documents Helm accepts, all admitted; of the others the CRD refuses %d, and lets Helm refuse the rest", helmAccepts, crdRefuses)
}

// FuzzConvertValuesSchema: whatever JSON schema a chart holds, the
// conversion neither panics nor fails on an object schema, and the API server
// accepts the CRD it gives.
func FuzzConvertValuesSchema(f *testing.F) {
	f.Add(paritySchema)
	f.Add(`{"type": "object", "properties": {"a": {"allOf": [{"$ref": "#"}, {"anyOf": [{"type": "string"}, {"type": ["object", "null"], "patternProperties": {"x": false}}]}]}}}`)
	f.Add(`{"properties": {"a": {"type": "array", "items": {"oneOf": [{"enum": [1, "a", null]}, {"const": {"k": 1}}]}, "uniqueItems": true, "default": [1]}}}`)
	f.Add(`{"properties": {"a": {"type": "integer", "exclusiveMinimum": true, "minimum": "x", "default": 1.5, "enum": []}}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		spec, _, err := ConvertValuesSchema([]byte(raw))
		if err != nil {
			return
		}
		admissible(spec)
		w := watches.Watch{
			GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"},
			Chart:            &chart.Chart{Metadata: &chart.Metadata{Name: "thing", Version: "1.0.0"}, Schema: []byte(raw)},
		}
		crd, err := CRD(w)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if errs := validateCRD(t, crd); len(errs) > 0 {
			t.Fatalf("%s: the apiserver would reject the CRD:\n%v", raw, errs.ToAggregate())
		}
	})
}

// TestRequiredKeysValuesYAMLSets: Helm checks the schema against the chart's
// values.yaml merged with the user's, so a required key values.yaml sets may
// be left out of a resource; one it does not set may not.
func TestRequiredKeysValuesYAMLSets(t *testing.T) {
	raw := `{"type": "object", "required": ["image", "token"], "properties": {
	  "image": {"type": "object", "required": ["repository"], "properties": {"repository": {"type": "string"}, "tag": {"type": "string"}}},
	  "token": {"type": "string"}
	}}`
	values := fromYAML(t, "image: {repository: nginx}")
	w := watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"},
		Chart:            &chart.Chart{Metadata: &chart.Metadata{Name: "thing", Version: "1.0.0"}, Schema: []byte(raw), Values: values},
	}
	crd, err := CRD(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ spec, wantErr string }{
		{"token: x", ""},
		{"token: x\nimage: {tag: '1.27'}", ""},
		{"image: {tag: '1.27'}", "spec.token"},
	} {
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "x", "namespace": "default"}, "spec": fromYAML(t, tt.spec)}
		merged := chartutil.CoalesceTables(fromYAML(t, tt.spec), fromYAML(t, "image: {repository: nginx}"))
		helmErr := chartutil.ValidateAgainstSingleSchema(merged, []byte(raw))
		_, errs := admit(t, crd, obj)
		switch {
		case tt.wantErr == "" && (helmErr != nil || len(errs) > 0):
			t.Errorf("%q: Helm says %v, the CRD %v; want both to accept", tt.spec, helmErr, errs.ToAggregate())
		case tt.wantErr != "" && (helmErr == nil || len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.wantErr)):
			t.Errorf("%q: Helm says %v, the CRD %v; want both to refuse %s", tt.spec, helmErr, errs.ToAggregate(), tt.wantErr)
		}
	}
}
