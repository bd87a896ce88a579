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

// ConvertValuesSchema converts a chart's values.schema.json (JSON Schema
// draft-07, as Helm validates values) into a structural OpenAPI v3 schema for
// the spec of a CRD.
//
// The conversion keeps type, description, default, enum (and const), format,
// minimum/maximum (inclusive or exclusive), multipleOf, minLength/maxLength,
// pattern, minItems/maxItems, minProperties/maxProperties, items, properties,
// required and local $refs (#/definitions/..., #/$defs/...), and maps:
//   - an object whose only member schema is additionalProperties to a map
//     (additionalProperties);
//   - an object without properties (e.g. resources, or the items of
//     tolerations) and an untyped node to x-kubernetes-preserve-unknown-fields
//     (free-form; an object keeps type: object);
//   - an object with properties that does not set additionalProperties: false
//     to properties plus x-kubernetes-preserve-unknown-fields, because Helm
//     accepts the undeclared keys too;
//   - type ["integer","string"] to x-kubernetes-int-or-string, and a "null"
//     member of a type list to nullable;
//   - uniqueItems on an array of scalars to x-kubernetes-list-type: set.
//
// Anything a structural schema cannot express (oneOf, anyOf, allOf, not,
// if/then/else, patternProperties, properties together with a schema for
// additionalProperties, tuple items, remote $refs, unknown keywords) is an
// error naming the value's path: the generator refuses rather than silently
// accepting less or more than Helm would.
func ConvertValuesSchema(raw []byte) (*apiextensionsv1.JSONSchemaProps, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep defaults and bounds exactly as written
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("values.schema.json is not valid JSON: %w", err)
	}
	rootMap, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("values.schema.json must be a JSON object")
	}
	c := &converter{root: rootMap}
	props := c.convert("", root)
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	if props.Type != "object" {
		return nil, fmt.Errorf("values.schema.json must describe an object, not %q", props.Type)
	}
	return &props, nil
}

// Keywords that only annotate a schema and have no structural counterpart.
var ignoredKeywords = map[string]bool{
	"$schema": true, "$id": true, "id": true, "$comment": true, "examples": true,
	"readOnly": true, "writeOnly": true, "definitions": true, "$defs": true,
	"contentMediaType": true, "contentEncoding": true,
}

// Keywords converted by converter.convert.
var convertedKeywords = map[string]bool{
	"$ref": true, "type": true, "title": true, "description": true, "default": true,
	"enum": true, "const": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "minLength": true, "maxLength": true, "pattern": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "items": true,
	"minProperties": true, "maxProperties": true,
	"properties": true, "required": true, "additionalProperties": true,
}

// Keywords a structural schema cannot express; named in the error.
var unsupportedKeywords = map[string]string{
	"oneOf":             "a structural schema allows no alternatives",
	"anyOf":             "a structural schema allows no alternatives",
	"allOf":             "a structural schema allows no alternatives",
	"not":               "a structural schema allows no negation",
	"if":                "a structural schema allows no conditionals",
	"then":              "a structural schema allows no conditionals",
	"else":              "a structural schema allows no conditionals",
	"patternProperties": "a CRD cannot key properties by pattern",
	"dependencies":      "a CRD cannot express dependent keys",
	"propertyNames":     "a CRD cannot constrain key names",
	"additionalItems":   "a CRD has no tuple arrays",
	"contains":          "a CRD cannot express contains",
}

type converter struct {
	root     map[string]any
	refStack []string
	errs     []error
}

func (c *converter) fail(path, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", displayPath(path), fmt.Sprintf(format, args...)))
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
			c.fail(path, "the schema false (no value allowed) cannot be represented")
		}
		return anyValue()
	case map[string]any:
		if ref, ok := n["$ref"]; ok {
			return c.convertRef(path, n, ref)
		}
		return c.convertObject(path, n)
	default:
		c.fail(path, "a schema must be an object or a boolean, not %T", node)
		return apiextensionsv1.JSONSchemaProps{}
	}
}

// convertRef resolves a local $ref and converts its target. Draft-07 ignores
// the siblings of $ref, but description, title and default beside a $ref are
// kept because they describe this use of the shared definition.
func (c *converter) convertRef(path string, n map[string]any, ref any) apiextensionsv1.JSONSchemaProps {
	refStr, _ := ref.(string)
	for k := range n {
		switch k {
		case "$ref", "description", "title", "default", "$comment", "examples":
		default:
			c.fail(path, "keyword %q beside $ref is ignored by JSON Schema draft-07; move it into the definition", k)
		}
	}
	target, err := c.resolve(refStr)
	if err != nil {
		c.fail(path, "%v", err)
		return apiextensionsv1.JSONSchemaProps{}
	}
	for _, seen := range c.refStack {
		if seen == refStr {
			c.fail(path, "recursive $ref %q cannot be represented in a CRD", refStr)
			return apiextensionsv1.JSONSchemaProps{}
		}
	}
	c.refStack = append(c.refStack, refStr)
	defer func() { c.refStack = c.refStack[:len(c.refStack)-1] }()

	merged := map[string]any{}
	if m, ok := target.(map[string]any); ok {
		for k, v := range m {
			merged[k] = v
		}
	} else {
		return c.convert(path, target)
	}
	for _, k := range []string{"description", "title", "default"} {
		if v, ok := n[k]; ok {
			merged[k] = v
		}
	}
	return c.convert(path, merged)
}

// resolve finds the target of a local JSON pointer reference such as
// "#/definitions/port".
func (c *converter) resolve(ref string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, fmt.Errorf("$ref %q: only local references (#/...) can be represented", ref)
	}
	var cur any = c.root
	for _, tok := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	return cur, nil
}

func (c *converter) convertObject(path string, n map[string]any) apiextensionsv1.JSONSchemaProps {
	for _, k := range slices.Sorted(maps.Keys(n)) {
		if reason, bad := unsupportedKeywords[k]; bad {
			c.fail(path, "keyword %q cannot be represented: %s", k, reason)
		} else if !convertedKeywords[k] && !ignoredKeywords[k] {
			c.fail(path, "unknown JSON Schema keyword %q", k)
		}
	}

	var p apiextensionsv1.JSONSchemaProps
	c.setType(path, n, &p)
	p.Description = c.str(path, n, "description")
	if path != "" {
		// The root's title names the schema file, not the spec.
		p.Title = c.str(path, n, "title")
	}
	p.Format = c.str(path, n, "format")
	p.Pattern = c.str(path, n, "pattern")
	if v, ok := n["default"]; ok {
		p.Default = c.json(path, v)
	}
	if v, ok := n["enum"]; ok {
		list, isList := v.([]any)
		if !isList || len(list) == 0 {
			c.fail(path, "enum must be a non-empty array")
		}
		for _, e := range list {
			p.Enum = append(p.Enum, *c.json(path, e))
		}
	}
	if v, ok := n["const"]; ok {
		if p.Enum != nil {
			c.fail(path, "both enum and const are set")
		}
		p.Enum = []apiextensionsv1.JSON{*c.json(path, v)}
	}
	c.setBounds(path, n, &p)
	p.MinLength = c.count(path, n, "minLength")
	p.MaxLength = c.count(path, n, "maxLength")
	p.MinItems = c.count(path, n, "minItems")
	p.MaxItems = c.count(path, n, "maxItems")
	p.MinProperties = c.count(path, n, "minProperties")
	p.MaxProperties = c.count(path, n, "maxProperties")

	switch p.Type {
	case "object":
		c.convertProperties(path, n, &p)
	case "array":
		c.convertItems(path, n, &p)
	default:
		for _, k := range []string{"properties", "additionalProperties", "required", "items"} {
			if _, ok := n[k]; ok {
				c.fail(path, "keyword %q needs type object or array, not %q", k, p.Type)
			}
		}
	}
	return p
}

// setType sets type, nullable and the int-or-string and free-form
// extensions.
func (c *converter) setType(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	var types []string
	switch t := n["type"].(type) {
	case nil:
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				c.fail(path, "type list members must be strings")
				continue
			}
			types = append(types, s)
		}
	default:
		c.fail(path, "type must be a string or a list of strings")
	}

	var nonNull []string
	for _, t := range types {
		if t == "null" {
			p.Nullable = true
		} else {
			nonNull = append(nonNull, t)
		}
	}
	sort.Strings(nonNull)
	switch {
	case len(types) > 0 && len(nonNull) == 0:
		c.fail(path, "a value that can only be null cannot be represented")
	case len(nonNull) == 1:
		p.Type = nonNull[0]
		switch p.Type {
		case "object", "array", "string", "integer", "number", "boolean":
		default:
			c.fail(path, "unknown type %q", p.Type)
		}
	case len(nonNull) == 2 && nonNull[0] == "integer" && nonNull[1] == "string":
		p.XIntOrString = true
		p.AnyOf = []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}
	case len(nonNull) > 1:
		c.fail(path, "type %v cannot be represented; only [integer, string] and [T, null] can", nonNull)
	default:
		// No type: infer it from the keywords that imply one, else accept any value.
		switch {
		case has(n, "properties", "additionalProperties", "required", "minProperties", "maxProperties"):
			p.Type = "object"
		case has(n, "items", "minItems", "maxItems", "uniqueItems"):
			p.Type = "array"
		case has(n, "enum", "const", "pattern", "minLength", "maxLength", "format",
			"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
			c.fail(path, "a value with validations needs a type")
		default:
			p.XPreserveUnknownFields = ptr.To(true)
		}
	}
}

func (c *converter) convertProperties(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	props, _ := n["properties"].(map[string]any)
	if _, ok := n["properties"]; ok && props == nil {
		c.fail(path, "properties must be an object")
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if p.Properties == nil {
			p.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		p.Properties[name] = c.convert(path+"."+name, props[name])
	}
	if req, ok := n["required"]; ok {
		list, isList := req.([]any)
		if !isList {
			c.fail(path, "required must be an array of property names")
		}
		for _, r := range list {
			s, isStr := r.(string)
			if !isStr {
				c.fail(path, "required must be an array of property names")
				continue
			}
			p.Required = append(p.Required, s)
		}
	}

	addl, hasAddl := n["additionalProperties"]
	switch a := addl.(type) {
	case nil:
		if hasAddl {
			c.fail(path, "additionalProperties must be a boolean or a schema")
		}
		// JSON Schema allows undeclared keys by default, and so does Helm.
		p.XPreserveUnknownFields = ptr.To(true)
	case bool:
		if a {
			p.XPreserveUnknownFields = ptr.To(true)
		}
		// false: a structural schema prunes (and a strict client rejects)
		// undeclared keys, which is what the chart asks for.
	case map[string]any:
		if len(props) > 0 {
			c.fail(path, "properties together with a schema for additionalProperties cannot be represented")
			break
		}
		item := c.convert(path+".*", a)
		if item.Type == "" && item.XPreserveUnknownFields != nil {
			// A map of anything is a free-form object.
			p.XPreserveUnknownFields = ptr.To(true)
			break
		}
		p.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &item}
	default:
		c.fail(path, "additionalProperties must be a boolean or a schema")
	}
}

func (c *converter) convertItems(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	items, ok := n["items"]
	var item apiextensionsv1.JSONSchemaProps
	switch {
	case !ok:
		item = anyValue()
	default:
		if _, tuple := items.([]any); tuple {
			c.fail(path, "tuple items (an array of schemas) cannot be represented")
			return
		}
		item = c.convert(path+"[]", items)
	}
	p.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}

	if u, _ := n["uniqueItems"].(bool); u {
		switch item.Type {
		case "string", "integer", "number", "boolean":
			p.XListType = ptr.To("set")
		default:
			c.fail(path, "uniqueItems on items of type %q cannot be represented; a CRD forbids uniqueItems and x-kubernetes-list-type: set needs scalar items", item.Type)
		}
	}
}

// setBounds converts minimum/maximum, draft-07's numeric exclusiveMinimum/
// exclusiveMaximum (and draft-04's boolean form) and multipleOf.
func (c *converter) setBounds(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	p.Minimum = c.number(path, n, "minimum")
	p.Maximum = c.number(path, n, "maximum")
	p.MultipleOf = c.number(path, n, "multipleOf")
	bound := func(key string, inclusive **float64, exclusive *bool, tighter func(a, b float64) bool) {
		switch v := n[key].(type) {
		case nil:
		case bool:
			*exclusive = v
		case json.Number:
			f := c.number(path, n, key)
			if f == nil {
				return
			}
			if *inclusive == nil || tighter(*f, **inclusive) || *f == **inclusive {
				*inclusive, *exclusive = f, true
			}
		default:
			c.fail(path, "%s must be a number", key)
		}
	}
	bound("exclusiveMinimum", &p.Minimum, &p.ExclusiveMinimum, func(a, b float64) bool { return a > b })
	bound("exclusiveMaximum", &p.Maximum, &p.ExclusiveMaximum, func(a, b float64) bool { return a < b })
}

func (c *converter) str(path string, n map[string]any, key string) string {
	v, ok := n[key]
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		c.fail(path, "%s must be a string", key)
	}
	return s
}

func (c *converter) number(path string, n map[string]any, key string) *float64 {
	v, ok := n[key]
	if !ok {
		return nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		c.fail(path, "%s must be a number", key)
		return nil
	}
	f, err := num.Float64()
	if err != nil {
		c.fail(path, "%s: %v", key, err)
		return nil
	}
	return &f
}

func (c *converter) count(path string, n map[string]any, key string) *int64 {
	v, ok := n[key]
	if !ok {
		return nil
	}
	num, isNum := v.(json.Number)
	i, err := num.Int64()
	if !isNum || err != nil || i < 0 {
		c.fail(path, "%s must be a non-negative integer", key)
		return nil
	}
	return &i
}

func (c *converter) json(path string, v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	if err != nil {
		c.fail(path, "%v", err)
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// anyValue is the schema of a value that may be anything.
func anyValue() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr.To(true)}
}

func has(n map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := n[k]; ok {
			return true
		}
	}
	return false
}
