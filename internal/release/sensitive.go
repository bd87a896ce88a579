package release

import (
	"encoding/json"
	"sort"
	"strings"
)

// anyKey is the element of a sensitive path that matches every key of a
// map and every item of a list (a schema's items, additionalProperties or
// patternProperties; "*" in watches.yaml sensitiveValues).
const anyKey = "*"

// SensitivePaths returns the paths of the values that the chart's
// values.schema.json marks secret — `"format": "password"` or
// `"writeOnly": true` — and those of the watch's sensitiveValues (dotted
// paths, "*" for any key or list item), sorted. A path names a subtree:
// every value under it is secret. A schema that does not parse marks
// nothing (Helm refuses to use it anyway); `$ref`s are not followed.
func SensitivePaths(schema []byte, listed []string) []string {
	set := map[string]bool{}
	for _, p := range listed {
		if p = strings.Trim(p, "."); p != "" {
			set[p] = true
		}
	}
	var root map[string]any
	if len(schema) > 0 && json.Unmarshal(schema, &root) == nil {
		walkSchema(root, nil, set)
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// walkSchema adds to set the path of each subschema of s, at path, that
// marks its value secret.
func walkSchema(s map[string]any, path []string, set map[string]bool) {
	if s == nil {
		return
	}
	if f, _ := s["format"].(string); f == "password" || s["writeOnly"] == true {
		if len(path) > 0 {
			set[strings.Join(path, ".")] = true
		}
		return
	}
	at := func(key string) []string { return append(append([]string(nil), path...), key) }
	if props, ok := s["properties"].(map[string]any); ok {
		for k, v := range props {
			sub, _ := v.(map[string]any)
			walkSchema(sub, at(k), set)
		}
	}
	for _, field := range []string{"items", "additionalProperties"} {
		if sub, ok := s[field].(map[string]any); ok {
			walkSchema(sub, at(anyKey), set)
		}
	}
	if pats, ok := s["patternProperties"].(map[string]any); ok {
		for _, v := range pats {
			sub, _ := v.(map[string]any)
			walkSchema(sub, at(anyKey), set)
		}
	}
	for _, field := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := s[field].([]any); ok {
			for _, v := range subs {
				sub, _ := v.(map[string]any)
				walkSchema(sub, path, set)
			}
		}
	}
}

// SensitiveValues returns the values of vals at paths (SensitivePaths),
// each a subtree, for a redactor to hide.
func SensitiveValues(vals map[string]any, paths []string) []any {
	var out []any
	for _, p := range paths {
		out = append(out, valuesAt(vals, strings.Split(p, "."))...)
	}
	return out
}

// valuesAt is what v holds at path, "*" matching every key or item.
func valuesAt(v any, path []string) []any {
	if len(path) == 0 {
		return []any{v}
	}
	var out []any
	switch t := v.(type) {
	case map[string]any:
		if path[0] == anyKey {
			for _, x := range t {
				out = append(out, valuesAt(x, path[1:])...)
			}
		} else if x, ok := t[path[0]]; ok {
			out = append(out, valuesAt(x, path[1:])...)
		}
	case []any:
		for _, x := range t {
			if path[0] == anyKey {
				out = append(out, valuesAt(x, path[1:])...)
			}
		}
	}
	return out
}
