package crdgen

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// maxExpansions bounds the $refs and allOfs expanded at one node, so a cycle
// through allOf members ends with a note rather than a hang.
const maxExpansions = 64

// expand returns the schema n with its local $ref and its allOf folded in,
// as one schema, and the $refs it followed. A $ref's target replaces it
// (draft-07: its siblings other than annotations are ignored, as Helm's
// validator ignores them) or, under draft 2020-12, is merged with its
// siblings; allOf members are merged into their parent. A $ref that cannot
// be followed (remote, dangling, recursive) becomes "any value" with a note.
func (c *converter) expand(path string, n map[string]any, refs []string) (map[string]any, []string) {
	for i := 0; ; i++ {
		if i == maxExpansions {
			c.note(path, "$ref and allOf nest too deep to follow; the CRD accepts any value")
			return annotations(n), refs
		}
		if ref, ok := n["$ref"]; ok {
			refStr, _ := ref.(string)
			target, ok := c.resolve(path, refStr)
			if !ok {
				return annotations(n), refs
			}
			if slices.Contains(c.refStack, refStr) || slices.Contains(refs, refStr) {
				c.note(path, "recursive $ref %q is not followed: the CRD accepts any value below this point", refStr)
				return annotations(n), refs
			}
			refs = append(refs, refStr)
			rest := without(n, "$ref")
			if c.draft7 {
				rest = annotations(rest)
			}
			// The use site's description and default describe this use of
			// the shared definition, so rest comes first.
			n = c.merge(path, rest, target)
			continue
		}
		if all, ok := n["allOf"]; ok {
			members, _ := all.([]any)
			n = without(n, "allOf")
			for _, m := range members {
				switch mm := m.(type) {
				case map[string]any:
					var em map[string]any
					em, refs = c.expand(path, mm, refs)
					n = c.merge(path, n, em)
				case bool:
					if !mm {
						c.note(path, "allOf holds the schema false (Helm refuses any value here), which is not checked")
					}
				}
			}
			continue
		}
		return n, refs
	}
}

// resolve finds the target of a local JSON pointer reference such as
// "#/definitions/port", as a schema map.
func (c *converter) resolve(path, ref string) (map[string]any, bool) {
	if !strings.HasPrefix(ref, "#") {
		c.note(path, "$ref %q is not local (#/...) and is not followed: the CRD accepts any value", ref)
		return nil, false
	}
	var cur any = c.root
	for _, tok := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			cur = nil
			break
		}
		cur = m[tok]
	}
	switch t := cur.(type) {
	case map[string]any:
		return t, true
	case bool:
		if t {
			return map[string]any{}, true
		}
	}
	c.note(path, "$ref %q does not resolve to a schema (Helm refuses this schema); the CRD accepts any value", ref)
	return nil, false
}

// merge returns a schema that accepts every value both a and b accept (and
// maybe more, never less): the conjunction of allOf, or of a $ref and its
// siblings. Properties of both are merged, required names joined, types
// intersected, bounds tightened and enums intersected; where two values of
// another keyword differ, a's is kept and b's dropped with a note.
// Annotations (description, title, default) come from a when it has them.
func (c *converter) merge(path string, a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		vb := b[k]
		va, ok := out[k]
		if !ok {
			out[k] = vb
			continue
		}
		if reflect.DeepEqual(va, vb) {
			continue
		}
		switch k {
		case "description", "title", "default", "examples", "$comment", "$schema", "$id",
			"definitions", "$defs":
			// a's annotation wins; definitions are reached through the root.
		case "properties", "patternProperties":
			pa, aok := va.(map[string]any)
			pb, bok := vb.(map[string]any)
			if !aok || !bok {
				c.note(path, "%s cannot be merged and only one is checked", k)
				continue
			}
			merged := maps.Clone(pa)
			for name, s := range pb {
				if prev, both := merged[name]; both {
					merged[name] = map[string]any{"allOf": []any{prev, s}}
				} else {
					merged[name] = s
				}
			}
			out[k] = merged
		case "items", "additionalProperties":
			if va == false || vb == false {
				out[k] = false
			} else if va == true {
				out[k] = vb
			} else if vb != true {
				out[k] = map[string]any{"allOf": []any{va, vb}}
			}
		case "required":
			la, _ := va.([]any)
			lb, _ := vb.([]any)
			joined := slices.Clone(la)
			for _, r := range lb {
				if !slices.Contains(joined, r) {
					joined = append(joined, r)
				}
			}
			out[k] = joined
		case "type":
			ta, aok := typeSet(map[string]any{"type": va})
			tb, bok := typeSet(map[string]any{"type": vb})
			if !aok || !bok {
				continue
			}
			both := intersectTypes(ta, tb)
			if len(both) == 0 {
				c.note(path, "allOf asks for type %v and %v, which no value is (Helm refuses any value here)", ta, tb)
				continue
			}
			out[k] = both
		case "enum":
			la, _ := va.([]any)
			lb, _ := vb.([]any)
			var both []any
			for _, e := range la {
				if slices.ContainsFunc(lb, func(f any) bool { return reflect.DeepEqual(e, f) }) {
					both = append(both, e)
				}
			}
			if len(both) == 0 {
				c.note(path, "allOf allows no value of its enums (Helm refuses any value here); only the first enum is checked")
				continue
			}
			out[k] = both
		case "minimum", "minLength", "minItems", "minProperties":
			out[k] = tighter(va, vb, func(x, y float64) bool { return x > y })
		case "maximum", "maxLength", "maxItems", "maxProperties":
			out[k] = tighter(va, vb, func(x, y float64) bool { return x < y })
		case "exclusiveMinimum", "exclusiveMaximum":
			if _, isBool := va.(bool); isBool {
				c.note(path, "%s is set twice and only the first is checked", k)
				continue
			}
			if k == "exclusiveMinimum" {
				out[k] = tighter(va, vb, func(x, y float64) bool { return x > y })
			} else {
				out[k] = tighter(va, vb, func(x, y float64) bool { return x < y })
			}
		case "uniqueItems":
			out[k] = va == true || vb == true
		default:
			c.note(path, "%q is set twice (allOf or $ref) with different values; only %s is checked", k, compact(va))
		}
	}
	return out
}

// intersectTypes returns the types in both lists; an integer is a number.
func intersectTypes(a, b []string) []any {
	var out []any
	for _, t := range a {
		switch {
		case slices.Contains(b, t):
			out = append(out, t)
		case t == "integer" && slices.Contains(b, "number"), t == "number" && slices.Contains(b, "integer"):
			out = append(out, "integer")
		}
	}
	return out
}

// tighter returns whichever of two JSON numbers wins by better; a non-number
// loses.
func tighter(a, b any, better func(x, y float64) bool) any {
	na, aok := a.(json.Number)
	nb, bok := b.(json.Number)
	if !bok {
		return a
	}
	if !aok {
		return b
	}
	fa, _ := na.Float64()
	fb, _ := nb.Float64()
	if better(fb, fa) {
		return b
	}
	return a
}

// valueAlternatives are the alternatives kept as an anyOf of value
// validations: each holds only scalar constraints on the node's one type.
// A node with both anyOf and oneOf gets one list of both, which accepts at
// least what each accepts.
type valueAlternatives struct {
	anyOf []apiextensionsv1.JSONSchemaProps
}

// alternatives folds a node's anyOf and oneOf into it where a structural
// schema can say the same, and drops them with a note where it cannot:
//   - alternatives of pairwise different types, each with only the keywords
//     of its own types (anyOf: [{type: integer, minimum: 0}, {type: string,
//     pattern: ...}], or [{type: string}, {type: null}]) are one schema of
//     several types: JSON Schema applies a keyword only to values of its
//     type, and at most one alternative matches a value's type;
//   - alternatives that only constrain a scalar of the node's one type
//     (anyOf: [{format: ipv4}, {format: ipv6}]) become anyOf value
//     validations, which the apiserver checks as Helm does (a oneOf too,
//     noted);
//   - otherwise the alternatives go unchecked: the node keeps its own
//     keywords, and the one type all alternatives share, if they share one.
//
// It also returns the $refs it followed, which guard the conversion of the
// node against recursion as the node's own do.
func (c *converter) alternatives(path string, n map[string]any) (map[string]any, valueAlternatives, []string) {
	var kept valueAlternatives
	var followed []string
	for _, key := range []string{"anyOf", "oneOf"} {
		raw, ok := n[key]
		if !ok {
			continue
		}
		n = without(n, key)
		list, _ := raw.([]any)
		var members []map[string]any
		for _, m := range list {
			switch mm := m.(type) {
			case map[string]any:
				em, refs := c.expand(path, mm, nil)
				followed = append(followed, refs...)
				members = append(members, em)
			case bool:
				members = append(members, map[string]any{}) // true: anything
			}
		}
		if len(members) == 0 {
			c.note(path, "%s has no alternatives and is not checked", key)
			continue
		}
		if flat, ok := flattenByType(members); ok {
			n = c.merge(path, n, flat)
			continue
		}
		if vals, ok := c.scalarAlternatives(path, n, members); ok {
			if key == "oneOf" {
				// The apiserver and Helm's validator need not agree on
				// every alternative (format, regex dialect), and under
				// oneOf an alternative the apiserver finds looser would
				// refuse a value Helm accepts; anyOf can only accept more.
				c.note(path, "oneOf is checked as anyOf: a value that matches several of its alternatives is accepted")
			}
			kept.anyOf = append(kept.anyOf, vals...)
			continue
		}
		shared := sharedType(members)
		if _, typed := typeSet(n); !typed && shared != "" {
			n["type"] = shared
		}
		c.note(path, "%s with alternatives of different shapes is not checked: the CRD accepts any %s here", key, describeType(n))
	}
	return n, kept, followed
}

// flattenByType merges alternatives of pairwise disjoint types into one
// schema of their union type, when each holds only the keywords of its own
// types (so no keyword of one applies to a value of another's type).
func flattenByType(members []map[string]any) (map[string]any, bool) {
	out := map[string]any{}
	var union []any
	seen := map[string]bool{}
	for _, m := range members {
		types, ok := typeSet(m)
		if !ok {
			return nil, false
		}
		for _, t := range types {
			if seen[t] || (t == "integer" && seen["number"]) || (t == "number" && seen["integer"]) {
				return nil, false
			}
		}
		for k, v := range m {
			if k == "type" || annotationKeys[k] {
				continue
			}
			if !slices.ContainsFunc(types, func(t string) bool { return slices.Contains(typeKeywords[t], k) }) {
				return nil, false
			}
			out[k] = v
		}
		for _, t := range types {
			seen[t] = true
			union = append(union, t)
		}
	}
	out["type"] = union
	return out, true
}

// typeKeywords are the keywords that apply to values of one type only.
var typeKeywords = map[string][]string{
	"string":  {"pattern", "minLength", "maxLength", "format"},
	"integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
	"number":  {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
	"object":  {"properties", "additionalProperties", "patternProperties", "required", "minProperties", "maxProperties"},
	"array":   {"items", "minItems", "maxItems", "uniqueItems"},
}

// scalarValidations are the keywords an anyOf/oneOf alternative may hold to
// be kept as a value validation.
var scalarValidations = []string{"enum", "const", "pattern", "minLength", "maxLength", "format",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}

// scalarAlternatives converts alternatives that only constrain a value of
// the node's one scalar type into value validations.
func (c *converter) scalarAlternatives(path string, n map[string]any, members []map[string]any) ([]apiextensionsv1.JSONSchemaProps, bool) {
	t := ""
	if types, ok := typeSet(n); ok {
		if len(types) != 1 {
			return nil, false
		}
		t = types[0]
	}
	for _, m := range members {
		if types, ok := typeSet(m); ok {
			if len(types) != 1 || (t != "" && types[0] != t) {
				return nil, false
			}
			t = types[0]
		}
	}
	switch t {
	case "string", "integer", "number", "boolean":
	default:
		return nil, false
	}
	var out []apiextensionsv1.JSONSchemaProps
	for _, m := range members {
		val := map[string]any{"type": t}
		for k, v := range m {
			switch {
			case k == "type" || annotationKeys[k]:
			case slices.Contains(scalarValidations, k):
				val[k] = v
			default:
				return nil, false
			}
		}
		sub := &converter{root: c.root, draft7: c.draft7}
		p := sub.convertObject(path, val, valueAlternatives{})
		if len(sub.notes) > 0 {
			return nil, false
		}
		// A value validation holds no type: the node outside has it.
		p.Type = ""
		out = append(out, p)
	}
	if _, typed := typeSet(n); !typed {
		n["type"] = t
	}
	return out, true
}

// sharedType is the one type every alternative names, or "".
func sharedType(members []map[string]any) string {
	shared := ""
	for _, m := range members {
		types, ok := typeSet(m)
		if !ok || len(types) != 1 || (shared != "" && types[0] != shared) {
			return ""
		}
		shared = types[0]
	}
	return shared
}

func describeType(n map[string]any) string {
	if t, ok := n["type"].(string); ok {
		return t
	}
	return "value"
}

// annotationKeys describe a schema without constraining values.
var annotationKeys = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "$comment": true,
	"readOnly": true, "writeOnly": true, "deprecated": true, "$id": true, "$schema": true,
}

// annotations keeps only the annotations of a schema: what is left of a
// schema that cannot be followed, which accepts any value.
func annotations(n map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range n {
		if annotationKeys[k] {
			out[k] = v
		}
	}
	return out
}

func without(n map[string]any, key string) map[string]any {
	out := maps.Clone(n)
	delete(out, key)
	return out
}

// compact renders a keyword's value for a note.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 60 {
		return "the first"
	}
	return string(b)
}
