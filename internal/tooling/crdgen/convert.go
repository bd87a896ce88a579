package crdgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// ConvertValuesSchema converts a chart's values.schema.json (JSON Schema, as
// Helm validates values: draft-07 when $schema names it, else 2020-12) into a
// structural OpenAPI v3 schema for the spec of a CRD, and returns a note for
// every part of the schema the CRD checks less strictly than Helm.
//
// The one rule: the CRD never refuses what Helm's schema check accepts. What
// a structural schema can say is represented: type, description, default,
// enum (and const), format (draft-07, where Helm asserts it), bounds,
// lengths, counts, items, properties, required, local $refs, allOf (merged),
// anyOf/oneOf whose alternatives differ only in type or only in scalar
// constraints, additionalProperties and patternProperties as maps, and:
//   - an object without properties (e.g. resources) and an untyped node to
//     x-kubernetes-preserve-unknown-fields (free-form; an object keeps type:
//     object);
//   - an object with properties that does not set additionalProperties: false
//     to properties plus x-kubernetes-preserve-unknown-fields, because Helm
//     accepts the undeclared keys too;
//   - type ["integer","string"] to x-kubernetes-int-or-string, ["integer",
//     "number"] to number, and a "null" member to nullable;
//   - uniqueItems on an array of scalars to x-kubernetes-list-type: set.
//
// Everything else (a value of several types, alternatives of one type with
// structure, not, if/then/else, tuples, remote or recursive $refs, ...) is
// degraded: the constraint is dropped, and a value whose type is not one
// becomes x-kubernetes-preserve-unknown-fields without a type, which accepts
// any value. Each degradation adds a note "values.<path>: <what>; <why>".
// Helm still checks the full schema when it installs, so a value the CRD
// let through is refused there, in the resource's status.
//
// Keywords JSON Schema does not define are ignored, as Helm ignores them.
// The error is only for input that is not a schema at all: not JSON, or not
// the schema of an object.
func ConvertValuesSchema(raw []byte) (*apiextensionsv1.JSONSchemaProps, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep defaults and bounds exactly as written
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, nil, fmt.Errorf("values.schema.json is not valid JSON: %w", err)
	}
	rootMap, ok := root.(map[string]any)
	if !ok {
		return nil, nil, errors.New("values.schema.json must be a JSON object")
	}
	if t, ok := rootMap["type"].(string); ok && t != "object" {
		return nil, nil, fmt.Errorf("values.schema.json must describe an object, not %q", t)
	}
	schemaURI, _ := rootMap["$schema"].(string)
	c := &converter{root: rootMap, draft7: isDraft7(schemaURI)}
	props := c.convert("", root)
	if props.Type == "" {
		// Values are always a map, whatever the root's alternatives say.
		props.Type = "object"
		props.XPreserveUnknownFields = ptr.To(true)
		props.XIntOrString = false
		props.AnyOf, props.OneOf = nil, nil
	}
	return &props, c.notes, nil
}

// isDraft7 tells whether $schema names draft-04, -06 or -07, under which
// Helm's validator asserts format and ignores the siblings of a $ref. Without
// $schema it uses draft 2020-12, where format is an annotation and a $ref's
// siblings apply beside it.
func isDraft7(uri string) bool {
	for _, d := range []string{"draft-04", "draft-06", "draft-07"} {
		if strings.Contains(uri, d) {
			return true
		}
	}
	return false
}

// Keywords that only annotate a schema, or hold definitions reached by $ref.
var ignoredKeywords = map[string]bool{
	"$schema": true, "$id": true, "id": true, "$comment": true, "examples": true,
	"readOnly": true, "writeOnly": true, "definitions": true, "$defs": true,
	"contentMediaType": true, "contentEncoding": true, "contentSchema": true,
	"deprecated": true, "$anchor": true, "$dynamicAnchor": true, "$vocabulary": true,
}

// Keywords a structural schema cannot express; dropped with a note saying why.
var droppedKeywords = map[string]string{
	"not":                   "a CRD cannot negate a schema",
	"if":                    "a CRD has no conditionals (if/then/else)",
	"then":                  "a CRD has no conditionals (if/then/else)",
	"else":                  "a CRD has no conditionals (if/then/else)",
	"dependencies":          "a CRD cannot make keys depend on each other",
	"dependentRequired":     "a CRD cannot make keys depend on each other",
	"dependentSchemas":      "a CRD cannot make keys depend on each other",
	"propertyNames":         "a CRD cannot constrain key names",
	"contains":              "a CRD cannot require an item to match",
	"minContains":           "a CRD cannot require an item to match",
	"maxContains":           "a CRD cannot require an item to match",
	"additionalItems":       "a CRD has no tuple arrays",
	"prefixItems":           "a CRD has no tuple arrays",
	"unevaluatedProperties": "a CRD cannot see which keys other schemas evaluated",
	"unevaluatedItems":      "a CRD cannot see which items other schemas evaluated",
	"$dynamicRef":           "a CRD has no dynamic references",
	"$recursiveRef":         "a CRD has no dynamic references",
}

type converter struct {
	root     map[string]any
	draft7   bool
	refStack []string // the $refs being converted, to stop at recursion
	notes    []string
}

// note records that the schema at path is checked less strictly by the CRD.
func (c *converter) note(path, format string, args ...any) {
	c.notes = append(c.notes, displayPath(path)+": "+fmt.Sprintf(format, args...))
}

func displayPath(path string) string {
	if path == "" {
		return "values"
	}
	return "values" + path
}

// convert converts one schema node found at path (".image.tag", ".tolerations[]").
func (c *converter) convert(path string, node any) apiextensionsv1.JSONSchemaProps {
	switch n := node.(type) {
	case bool:
		if !n {
			c.note(path, "the schema false (Helm refuses any value here) is not checked; the CRD accepts any value")
		}
		return anyValue()
	case map[string]any:
		depth := len(c.refStack)
		defer func() { c.refStack = c.refStack[:depth] }()
		expanded, refs := c.expand(path, n, nil)
		c.refStack = append(c.refStack, refs...)
		node, alts, altRefs := c.alternatives(path, expanded)
		c.refStack = append(c.refStack, altRefs...)
		return c.convertObject(path, node, alts)
	default:
		c.note(path, "a schema must be an object or a boolean, not %T; the CRD accepts any value", node)
		return anyValue()
	}
}

func (c *converter) convertObject(path string, n map[string]any, alts valueAlternatives) apiextensionsv1.JSONSchemaProps {
	for _, k := range slices.Sorted(maps.Keys(n)) {
		if reason, dropped := droppedKeywords[k]; dropped && k != "then" && k != "else" {
			c.note(path, "%q is not checked: %s", k, reason)
		}
		// Other keywords JSON Schema does not define (a chart's own
		// annotations, typos) are ignored, as Helm's validator ignores them.
	}

	var p apiextensionsv1.JSONSchemaProps
	if !c.setType(path, n, &p) {
		// A value of several types: a structural schema can only accept any.
		nullable := p.Nullable
		p = anyValue()
		p.Nullable = nullable
		p.Description = c.str(path, n, "description")
		if path != "" {
			p.Title = c.str(path, n, "title")
		}
		if v, ok := n["default"]; ok {
			p.Default = c.json(path, v)
		}
		return p
	}
	p.Description = c.str(path, n, "description")
	if path != "" {
		// The root's title names the schema file, not the spec.
		p.Title = c.str(path, n, "title")
	}
	if c.draft7 {
		// Draft 2020-12 makes format an annotation, which Helm does not assert.
		p.Format = c.str(path, n, "format")
	}
	p.Pattern = c.str(path, n, "pattern")
	if v, ok := n["default"]; ok {
		p.Default = c.json(path, v)
	}
	c.setEnum(path, n, &p)
	c.setBounds(path, n, &p)
	p.MinLength = c.count(path, n, "minLength")
	p.MaxLength = c.count(path, n, "maxLength")
	p.MinItems = c.count(path, n, "minItems")
	p.MaxItems = c.count(path, n, "maxItems")
	p.MinProperties = c.count(path, n, "minProperties")
	p.MaxProperties = c.count(path, n, "maxProperties")
	if p.XIntOrString {
		if len(alts.anyOf) > 0 {
			// int-or-string owns anyOf; its alternatives' constraints are
			// type-specific and already flattened (see alternatives).
			c.note(path, "alternatives beside integer-or-string are not checked")
		}
	} else {
		p.AnyOf = alts.anyOf
	}

	switch {
	case p.Type == "object":
		c.convertProperties(path, n, &p)
	case p.Type == "array":
		c.convertItems(path, n, &p)
	default:
		// properties, items and the like apply to objects and arrays only:
		// JSON Schema ignores them on a value of another type, and so does
		// the CRD.
	}
	return p
}

// setType sets type, nullable and the int-or-string and free-form
// extensions. It returns false for a value that may be of several types
// that no structural schema covers, after noting it.
func (c *converter) setType(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) bool {
	types, typed := typeSet(n)
	if !typed {
		if _, has := n["type"]; has {
			c.note(path, "type %v is not a type or a list of types; the CRD accepts any value", n["type"])
			return false
		}
		// No type: infer it from the keywords that imply one, else accept any value.
		switch {
		case has(n, "properties", "additionalProperties", "patternProperties", "required", "minProperties", "maxProperties"):
			types = []string{"object"}
		case has(n, "items", "minItems", "maxItems", "uniqueItems"):
			types = []string{"array"}
		default:
			if t := enumType(n); t != nil {
				// Every allowed value has the same JSON type: that is the type.
				types = t
				break
			}
			if has(n, "pattern", "minLength", "maxLength", "minimum", "maximum",
				"exclusiveMinimum", "exclusiveMaximum", "multipleOf", "enum", "const") {
				c.note(path, "constraints without a type are not checked; the CRD accepts any value")
				return false
			}
			p.XPreserveUnknownFields = ptr.To(true)
			return true
		}
	}

	var nonNull []string
	for _, t := range types {
		switch t {
		case "null":
			p.Nullable = true
		case "object", "array", "string", "integer", "number", "boolean":
			nonNull = append(nonNull, t)
		default:
			c.note(path, "unknown type %q; the CRD accepts any value", t)
			return false
		}
	}
	sort.Strings(nonNull)
	nonNull = slices.Compact(nonNull)
	if len(nonNull) == 2 && nonNull[0] == "integer" && nonNull[1] == "number" {
		nonNull = []string{"number"} // every integer is a number
	}
	switch {
	case len(nonNull) == 0:
		c.note(path, "a value that can only be null is accepted as any value")
		return false
	case len(nonNull) == 1:
		p.Type = nonNull[0]
	case len(nonNull) == 2 && nonNull[0] == "integer" && nonNull[1] == "string":
		p.XIntOrString = true
		p.AnyOf = []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}
	default:
		c.note(path, "a value of type %s cannot be checked by a structural schema (one type, or integer or string); the CRD accepts any value",
			strings.Join(nonNull, " or "))
		return false
	}
	return true
}

// typeSet reads the type keyword: its types and whether it is well-formed.
func typeSet(n map[string]any) ([]string, bool) {
	switch t := n["type"].(type) {
	case string:
		return []string{t}, true
	case []any:
		var out []string
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// enumType is the one JSON type of every value enum or const allows (plus
// "null" when null is one of them), or nil when they differ.
func enumType(n map[string]any) []string {
	vals, _ := n["enum"].([]any)
	if v, ok := n["const"]; ok {
		vals = []any{v}
	}
	seen := map[string]bool{}
	for _, v := range vals {
		seen[jsonType(v)] = true
	}
	null := seen["null"]
	delete(seen, "null")
	if len(seen) != 1 {
		return nil
	}
	out := slices.Collect(maps.Keys(seen))
	if null {
		out = append(out, "null")
	}
	return out
}

// jsonType names the JSON Schema type of a decoded JSON value.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	default:
		return "object"
	}
}

func (c *converter) setEnum(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	if v, ok := n["const"]; ok {
		// Alone, or beside an enum: the const is the stricter of the two.
		p.Enum = []apiextensionsv1.JSON{*c.json(path, v)}
		return
	}
	v, ok := n["enum"]
	if !ok {
		return
	}
	list, isList := v.([]any)
	if !isList || len(list) == 0 {
		c.note(path, "enum %v is not a non-empty array and is not checked", v)
		return
	}
	for _, e := range list {
		if e == nil && !p.Nullable {
			// null in an enum without nullable: the apiserver drops null
			// values of a non-nullable field anyway.
			continue
		}
		p.Enum = append(p.Enum, *c.json(path, e))
	}
}
