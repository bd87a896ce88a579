package crdgen

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestConvertValuesSchema converts the schema of one value, v, and compares
// the result as YAML, the form a reader of the CRD sees.
func TestConvertValuesSchema(t *testing.T) {
	tests := []struct {
		name     string
		schema   string // the schema of property v
		want     string // YAML of the converted v
		wantNote string // a note the conversion must give; none when empty
	}{
		{
			name:   "integer with bounds and default",
			schema: `{"type": "integer", "description": "Pods.", "minimum": 0, "maximum": 10, "default": 1}`,
			want:   "default: 1\ndescription: Pods.\nmaximum: 10\nminimum: 0\ntype: integer\n",
		},
		{
			name:   "string enum, pattern, lengths, format, title",
			schema: `{"type": "string", "title": "Policy", "enum": ["A", "B"], "pattern": "^[AB]$", "minLength": 1, "maxLength": 1, "format": "byte"}`,
			want:   "enum:\n- A\n- B\nformat: byte\nmaxLength: 1\nminLength: 1\npattern: ^[AB]$\ntitle: Policy\ntype: string\n",
		},
		{
			name:   "const becomes a one-value enum",
			schema: `{"type": "string", "const": "x"}`,
			want:   "enum:\n- x\ntype: string\n",
		},
		{
			name:   "draft-07 exclusive bounds",
			schema: `{"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25}`,
			want:   "exclusiveMaximum: true\nexclusiveMinimum: true\nmaximum: 1\nminimum: 0\nmultipleOf: 0.25\ntype: number\n",
		},
		{
			name:   "draft-04 boolean exclusive bound",
			schema: `{"type": "number", "minimum": 0, "exclusiveMinimum": true}`,
			want:   "exclusiveMinimum: true\nminimum: 0\ntype: number\n",
		},
		{
			name:   "looser exclusive bound keeps the inclusive one",
			schema: `{"type": "integer", "minimum": 5, "exclusiveMinimum": 1}`,
			want:   "minimum: 5\ntype: integer\n",
		},
		{
			name:   "free-form object",
			schema: `{"type": "object", "description": "Resources.", "default": {}}`,
			want:   "default: {}\ndescription: Resources.\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n",
		},
		{
			name:   "map of strings",
			schema: `{"type": "object", "additionalProperties": {"type": "string"}}`,
			want:   "additionalProperties:\n  type: string\ntype: object\n",
		},
		{
			name:   "map of anything is free-form",
			schema: `{"type": "object", "additionalProperties": {}}`,
			want:   "type: object\nx-kubernetes-preserve-unknown-fields: true\n",
		},
		{
			name:   "closed object",
			schema: `{"type": "object", "additionalProperties": false, "required": ["a"], "properties": {"a": {"type": "boolean"}}}`,
			want:   "properties:\n  a:\n    type: boolean\nrequired:\n- a\ntype: object\n",
		},
		{
			name:   "open object keeps undeclared keys as Helm does",
			schema: `{"type": "object", "properties": {"a": {"type": "boolean"}}}`,
			want:   "properties:\n  a:\n    type: boolean\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n",
		},
		{
			name:   "array of free-form objects",
			schema: `{"type": "array", "items": {"type": "object"}, "maxItems": 3, "default": []}`,
			want:   "default: []\nitems:\n  type: object\n  x-kubernetes-preserve-unknown-fields: true\nmaxItems: 3\ntype: array\n",
		},
		{
			name:   "array without items holds anything",
			schema: `{"type": "array"}`,
			want:   "items:\n  x-kubernetes-preserve-unknown-fields: true\ntype: array\n",
		},
		{
			name:   "unique scalars become a set",
			schema: `{"type": "array", "items": {"type": "string"}, "uniqueItems": true}`,
			want:   "items:\n  type: string\ntype: array\nx-kubernetes-list-type: set\n",
		},
		{
			name:   "integer or string",
			schema: `{"type": ["integer", "string"], "default": 1}`,
			want:   "anyOf:\n- type: integer\n- type: string\ndefault: 1\nx-kubernetes-int-or-string: true\n",
		},
		{
			name:   "nullable",
			schema: `{"type": ["string", "null"]}`,
			want:   "nullable: true\ntype: string\n",
		},
		{
			name:   "untyped value is anything",
			schema: `{"description": "Anything."}`,
			want:   "description: Anything.\nx-kubernetes-preserve-unknown-fields: true\n",
		},
		{
			name:   "type inferred from properties",
			schema: `{"additionalProperties": false, "properties": {"a": {"type": "string"}}}`,
			want:   "properties:\n  a:\n    type: string\ntype: object\n",
		},
		{
			name:   "local $ref with description beside it",
			schema: `{"$ref": "#/definitions/port", "description": "Service port."}`,
			want:   "description: Service port.\nmaximum: 65535\nminimum: 1\ntype: integer\n",
		},
		{
			name:   "anyOf of one type differing only in scalar constraints is kept",
			schema: `{"type": "string", "anyOf": [{"format": "ipv4"}, {"pattern": "^[a-z]+$"}]}`,
			want:   "anyOf:\n- format: ipv4\n- pattern: ^[a-z]+$\ntype: string\n",
		},
		{
			name:     "oneOf of scalar constraints is checked as anyOf",
			schema:   `{"type": "integer", "oneOf": [{"minimum": 10}, {"enum": [0]}]}`,
			want:     "anyOf:\n- minimum: 10\n- enum:\n  - 0\ntype: integer\n",
			wantNote: "values.v: oneOf is checked as anyOf",
		},
		{
			name:   "anyOf of types is a type union: string or null",
			schema: `{"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}], "description": "Name."}`,
			want:   "description: Name.\nminLength: 1\nnullable: true\ntype: string\n",
		},
		{
			name:   "oneOf integer or patterned string is int-or-string",
			schema: `{"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}]}`,
			want:   "anyOf:\n- type: integer\n- type: string\nminimum: 0\npattern: ^[0-9]+%$\nx-kubernetes-int-or-string: true\n",
		},
		{
			name:     "anyOf object or string accepts anything",
			schema:   `{"description": "Config.", "anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "string"}]}`,
			want:     "description: Config.\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: "values.v: a value of type object or string cannot be checked",
		},
		{
			name:     "oneOf of objects keeps the shared type",
			schema:   `{"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]}`,
			want:     "type: object\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: `values.v: oneOf with alternatives of different shapes is not checked: the CRD accepts any object here`,
		},
		{
			name:   "allOf is merged",
			schema: `{"type": "object", "allOf": [{"required": ["a"], "properties": {"a": {"type": "integer", "minimum": 1}}}, {"properties": {"a": {"maximum": 5}, "b": {"type": "string"}}}]}`,
			want:   "properties:\n  a:\n    maximum: 5\n    minimum: 1\n    type: integer\n  b:\n    type: string\nrequired:\n- a\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n",
		},
		{
			name:     "allOf conflicting patterns keeps the first",
			schema:   `{"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]}`,
			want:     "pattern: ^a\ntype: string\n",
			wantNote: `values.v: "pattern" is set twice (allOf or $ref) with different values; only "^a" is checked`,
		},
		{
			name:   "patternProperties with a catch-all is a map",
			schema: `{"type": "object", "patternProperties": {".*": {"type": "string"}}}`,
			want:   "additionalProperties:\n  type: string\ntype: object\n",
		},
		{
			name:     "closed patternProperties is a map whose keys go unchecked",
			schema:   `{"type": "object", "additionalProperties": false, "patternProperties": {"^[a-z]+$": {"type": "integer"}}}`,
			want:     "additionalProperties:\n  type: integer\ntype: object\n",
			wantNote: "values.v: the keys' patterns [^[a-z]+$] are not checked; their values are",
		},
		{
			name:     "open patternProperties is free-form",
			schema:   `{"type": "object", "patternProperties": {"^a": {"type": "string"}}}`,
			want:     "type: object\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: "values.v: patternProperties with keys of different schemas is not checked",
		},
		{
			name:     "not is dropped",
			schema:   `{"type": "string", "not": {"enum": ["x"]}}`,
			want:     "type: string\n",
			wantNote: `values.v: "not" is not checked: a CRD cannot negate a schema`,
		},
		{
			name:     "if/then/else is dropped with one note",
			schema:   `{"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {}}`,
			want:     "type: object\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: `values.v: "if" is not checked: a CRD has no conditionals`,
		},
		{
			name:   "unknown keywords are ignored as Helm ignores them",
			schema: `{"type": "string", "desciption": "typo", "form": true}`,
			want:   "type: string\n",
		},
		{
			name:     "type list of several types accepts anything",
			schema:   `{"type": ["string", "boolean"], "enum": ["auto", true], "default": "auto"}`,
			want:     "default: auto\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: "values.v: a value of type boolean or string cannot be checked",
		},
		{name: "integer or number is a number", schema: `{"type": ["integer", "number"]}`, want: "type: number\n"},
		{name: "enum without a type takes the values' type", schema: `{"enum": ["a", "b"]}`, want: "enum:\n- a\n- b\ntype: string\n"},
		{name: "only null", schema: `{"type": "null"}`, want: "nullable: true\nx-kubernetes-preserve-unknown-fields: true\n", wantNote: "can only be null"},
		{name: "unknown type", schema: `{"type": "float"}`, want: "x-kubernetes-preserve-unknown-fields: true\n", wantNote: `unknown type "float"`},
		{name: "tuple items", schema: `{"type": "array", "items": [{"type": "string"}]}`,
			want: "items:\n  x-kubernetes-preserve-unknown-fields: true\ntype: array\n", wantNote: "tuple items"},
		{name: "unique objects", schema: `{"type": "array", "items": {"type": "object"}, "uniqueItems": true}`,
			want: "items:\n  type: object\n  x-kubernetes-preserve-unknown-fields: true\ntype: array\n", wantNote: "uniqueItems is not checked"},
		{name: "properties and a map", schema: `{"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}`,
			want:     "properties:\n  a:\n    type: string\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: "values.v: the keys beside its properties are not checked against additionalProperties"},
		{name: "remote $ref", schema: `{"$ref": "https://example.com/schema.json", "description": "Remote."}`,
			want: "description: Remote.\nx-kubernetes-preserve-unknown-fields: true\n", wantNote: "is not local"},
		{name: "dangling $ref", schema: `{"$ref": "#/definitions/nope"}`, want: "x-kubernetes-preserve-unknown-fields: true\n", wantNote: "does not resolve"},
		{name: "recursive $ref", schema: `{"$ref": "#/definitions/tree"}`,
			want:     "properties:\n  child:\n    x-kubernetes-preserve-unknown-fields: true\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: `values.v.child: recursive $ref "#/definitions/tree" is not followed`},
		{name: "validation without a type", schema: `{"pattern": "^a"}`, want: "x-kubernetes-preserve-unknown-fields: true\n", wantNote: "constraints without a type"},
		{name: "false schema", schema: `false`, want: "x-kubernetes-preserve-unknown-fields: true\n", wantNote: "the schema false"},
		{name: "nested note names the path", schema: `{"type": "object", "properties": {"w": {"type": "array", "items": {"type": "string", "not": {}}}}}`,
			want:     "properties:\n  w:\n    items:\n      type: string\n    type: array\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n",
			wantNote: `values.v.w[]: "not" is not checked`},
	}
	const definitions = `"definitions": {
		"port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "A port."},
		"tree": {"type": "object", "properties": {"child": {"$ref": "#/definitions/tree"}}}
	}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": false, ` + definitions + `, "properties": {"v": ` + tt.schema + `}}`
			got, notes, err := ConvertValuesSchema([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantNote == "" && len(notes) > 0:
				t.Errorf("notes = %q, want none", notes)
			case tt.wantNote != "" && !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, tt.wantNote) }):
				t.Errorf("notes = %q, want one containing %q", notes, tt.wantNote)
			}
			out, err := yaml.Marshal(got.Properties["v"])
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tt.want)
			}
		})
	}
}

func TestConvertValuesSchemaRoot(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{"not JSON", `{`, "not valid JSON"},
		{"not an object", `[]`, "must be a JSON object"},
		{"not an object schema", `{"type": "string"}`, "must describe an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ConvertValuesSchema([]byte(tt.raw))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}

	// The root's own title and annotations do not leak into spec.
	got, _, err := ConvertValuesSchema([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "title": "values", "type": "object", "additionalProperties": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "" || got.XPreserveUnknownFields != nil {
		t.Errorf("root = %+v", got)
	}

	// Every degraded value is noted, in the order of the schema's keys.
	_, notes, err := ConvertValuesSchema([]byte(`{"type": "object", "properties": {"a": {"oneOf": []}, "b": {"type": ["string", "object"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "values.a: oneOf has no alternatives") || !strings.HasPrefix(notes[1], "values.b: a value of type object or string") {
		t.Errorf("notes = %q", notes)
	}

	// A root whose alternatives leave no type is still an object: values
	// are a map.
	got, _, err = ConvertValuesSchema([]byte(`{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != "object" || got.XPreserveUnknownFields == nil {
		t.Errorf("root = %+v", got)
	}
}

// TestConvertDraft2020 checks what differs when $schema does not name
// draft-07 (Helm then validates with draft 2020-12): format is an annotation
// Helm does not assert, and the siblings of a $ref apply beside it.
func TestConvertDraft2020(t *testing.T) {
	got, notes, err := ConvertValuesSchema([]byte(`{
	  "$defs": {"port": {"type": "integer", "minimum": 1}},
	  "type": "object",
	  "properties": {
	    "url": {"type": "string", "format": "uri"},
	    "port": {"$ref": "#/$defs/port", "maximum": 1024}
	  }
	}`))
	if err != nil || len(notes) > 0 {
		t.Fatal(err, notes)
	}
	out, _ := yaml.Marshal(got.Properties)
	want := "port:\n  maximum: 1024\n  minimum: 1\n  type: integer\nurl:\n  type: string\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}
