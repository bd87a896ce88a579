package crdgen

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestConvertValuesSchema converts the schema of one value, v, and compares
// the result as YAML, the form a reader of the CRD sees.
func TestConvertValuesSchema(t *testing.T) {
	tests := []struct {
		name    string
		schema  string // the schema of property v
		want    string // YAML of the converted v
		wantErr string
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
		{name: "oneOf", schema: `{"oneOf": [{"type": "string"}, {"type": "integer"}]}`, wantErr: `values.v: keyword "oneOf" cannot be represented`},
		{name: "allOf", schema: `{"type": "object", "allOf": [{"required": ["a"]}]}`, wantErr: `keyword "allOf" cannot be represented`},
		{name: "patternProperties", schema: `{"type": "object", "patternProperties": {"^a": {}}}`, wantErr: `"patternProperties" cannot be represented`},
		{name: "unknown keyword", schema: `{"type": "string", "desciption": "typo"}`, wantErr: `values.v: unknown JSON Schema keyword "desciption"`},
		{name: "type list", schema: `{"type": ["string", "boolean"]}`, wantErr: "type [boolean string] cannot be represented"},
		{name: "only null", schema: `{"type": "null"}`, wantErr: "only be null"},
		{name: "unknown type", schema: `{"type": "float"}`, wantErr: `unknown type "float"`},
		{name: "tuple items", schema: `{"type": "array", "items": [{"type": "string"}]}`, wantErr: "tuple items"},
		{name: "unique objects", schema: `{"type": "array", "items": {"type": "object"}, "uniqueItems": true}`, wantErr: "uniqueItems"},
		{name: "properties and a map", schema: `{"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}`,
			wantErr: "properties together with a schema for additionalProperties"},
		{name: "remote $ref", schema: `{"$ref": "https://example.com/schema.json"}`, wantErr: "only local references"},
		{name: "dangling $ref", schema: `{"$ref": "#/definitions/nope"}`, wantErr: "does not resolve"},
		{name: "recursive $ref", schema: `{"$ref": "#/definitions/tree"}`, wantErr: "recursive $ref"},
		{name: "validation without a type", schema: `{"pattern": "^a"}`, wantErr: "needs a type"},
		{name: "false schema", schema: `false`, wantErr: "cannot be represented"},
		{name: "nested error names the path", schema: `{"type": "object", "properties": {"w": {"type": "array", "items": {"not": {}}}}}`,
			wantErr: `values.v.w[]: keyword "not"`},
	}
	const definitions = `"definitions": {
		"port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "A port."},
		"tree": {"type": "object", "properties": {"child": {"$ref": "#/definitions/tree"}}}
	}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := `{"type": "object", "additionalProperties": false, ` + definitions + `, "properties": {"v": ` + tt.schema + `}}`
			got, err := ConvertValuesSchema([]byte(raw))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
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
		{"every error is listed", `{"type": "object", "properties": {"a": {"oneOf": []}, "b": {"typo": 1}}}`, "values.b: unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ConvertValuesSchema([]byte(tt.raw))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}

	// The root's own title and annotations do not leak into spec.
	got, err := ConvertValuesSchema([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "title": "values", "type": "object", "additionalProperties": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "" || got.XPreserveUnknownFields != nil {
		t.Errorf("root = %+v", got)
	}
}
