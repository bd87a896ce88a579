package crdgen

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// convertProperties converts the keywords of an object: properties,
// required, additionalProperties and patternProperties. A structural schema
// has either properties or one schema for every key (a map), so what holds
// both keeps its properties and lets the other keys through unchecked.
func (c *converter) convertProperties(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	props, _ := n["properties"].(map[string]any)
	if _, ok := n["properties"]; ok && props == nil {
		c.note(path, "properties is not an object and is not checked")
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if p.Properties == nil {
			p.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		p.Properties[name] = c.convert(path+"."+name, props[name])
	}
	if req, ok := n["required"]; ok {
		list, _ := req.([]any)
		for _, r := range list {
			if s, isStr := r.(string); isStr {
				p.Required = append(p.Required, s)
			}
		}
		if len(p.Required) != len(list) || list == nil {
			c.note(path, "required is not a list of names; the names that are not strings are not checked")
		}
	}

	addl, hasAddl := n["additionalProperties"]
	if pp, ok := n["patternProperties"]; ok {
		c.patternProperties(path, pp, addl, hasAddl, p)
		return
	}
	switch a := addl.(type) {
	case bool:
		if a {
			p.XPreserveUnknownFields = ptr.To(true)
		}
		// false: a structural schema prunes (and a strict client rejects)
		// undeclared keys, which is what the chart asks for.
	case map[string]any:
		if len(props) > 0 {
			c.note(path, "the keys beside its properties are not checked against additionalProperties: a CRD has either properties or a map")
			p.XPreserveUnknownFields = ptr.To(true)
			return
		}
		c.setMap(path+".*", a, p)
	default:
		if hasAddl {
			c.note(path, "additionalProperties is neither a boolean nor a schema and is not checked")
		}
		// JSON Schema allows undeclared keys by default, and so does Helm.
		p.XPreserveUnknownFields = ptr.To(true)
	}
}

// patternProperties represents an object whose keys are matched by pattern.
// It is a map when one schema covers every key Helm lets through: a catch-all
// pattern, or patterns and additionalProperties all of the same schema, or
// additionalProperties: false (then only the keys' patterns go unchecked).
// Anything else is a free-form object.
func (c *converter) patternProperties(path string, pp, addl any, hasAddl bool, p *apiextensionsv1.JSONSchemaProps) {
	patterns, _ := pp.(map[string]any)
	if len(p.Properties) > 0 || len(patterns) == 0 {
		c.note(path, "patternProperties is not checked: a CRD has either properties or a map")
		p.XPreserveUnknownFields = ptr.To(true)
		return
	}
	var value any
	same := true
	catchAll := false
	for _, k := range slices.Sorted(maps.Keys(patterns)) {
		if value != nil && !reflect.DeepEqual(value, patterns[k]) {
			same = false
		}
		value = patterns[k]
		switch k {
		case "", ".*", "^.*$", "^.*", ".*$":
			catchAll = true
		}
	}
	closed := hasAddl && addl == false
	switch {
	case same && (catchAll || closed || (hasAddl && reflect.DeepEqual(addl, value))):
		if closed && !catchAll {
			c.note(path, "the keys' patterns %v are not checked; their values are", slices.Sorted(maps.Keys(patterns)))
		}
		c.setMap(path+".*", value, p)
	default:
		c.note(path, "patternProperties with keys of different schemas is not checked: the CRD accepts any object here")
		p.XPreserveUnknownFields = ptr.To(true)
	}
}

// setMap makes p a map whose values have the schema value.
func (c *converter) setMap(path string, value any, p *apiextensionsv1.JSONSchemaProps) {
	item := c.convert(path, value)
	if item.Type == "" && item.XPreserveUnknownFields != nil && !item.XIntOrString {
		// A map of anything is a free-form object.
		p.XPreserveUnknownFields = ptr.To(true)
		return
	}
	p.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &item}
}

func (c *converter) convertItems(path string, n map[string]any, p *apiextensionsv1.JSONSchemaProps) {
	items, ok := n["items"]
	item := anyValue()
	switch {
	case !ok:
	case has(n, "prefixItems"):
		// Noted with prefixItems: items then applies only past the tuple.
	default:
		if _, tuple := items.([]any); tuple {
			c.note(path, "tuple items (a list of schemas) are not checked: the CRD accepts items of any type")
			break
		}
		item = c.convert(path+"[]", items)
	}
	p.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}

	if u, _ := n["uniqueItems"].(bool); u {
		switch item.Type {
		case "string", "integer", "number", "boolean":
			p.XListType = ptr.To("set")
		default:
			c.note(path, "uniqueItems is not checked: a CRD can only require unique scalar items")
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
			*exclusive = v && *inclusive != nil
		case json.Number:
			f := c.number(path, n, key)
			if f == nil {
				return
			}
			if *inclusive == nil || tighter(*f, **inclusive) || *f == **inclusive {
				*inclusive, *exclusive = f, true
			}
		default:
			c.note(path, "%s is not a number and is not checked", key)
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
		c.note(path, "%s is not a string and is not used", key)
	}
	return s
}

func (c *converter) number(path string, n map[string]any, key string) *float64 {
	v, ok := n[key]
	if !ok {
		return nil
	}
	num, isNum := v.(json.Number)
	f, err := num.Float64()
	if !isNum || err != nil {
		c.note(path, "%s is not a number and is not checked", key)
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
		c.note(path, "%s is not a non-negative integer and is not checked", key)
		return nil
	}
	return &i
}

func (c *converter) json(path string, v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	if err != nil {
		c.note(path, "%v", err)
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
