package crdgen

import (
	"fmt"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// ValuesYAMLSchema types the spec of a chart that has no values.schema.json
// from its values.yaml, so that `kubectl explain` and a console's form show
// the chart's values:
//   - a string is a string, true/false a boolean, a number a number (an
//     integer only where the key names a Kubernetes integer, see numberType);
//   - a map is an object with a property per key, and
//     x-kubernetes-preserve-unknown-fields, because Helm accepts keys
//     values.yaml does not list;
//   - a list is an array whose items have the type its elements agree on,
//     else any type;
//   - where values.yaml does not show a type (null, an empty string, a custom
//     tag) the value is x-kubernetes-preserve-unknown-fields without a type,
//     which accepts any value; an empty map is a free-form object and an
//     empty list a list of anything.
//
// No default is copied into the CRD: Helm applies values.yaml's defaults
// itself, and a default in the CRD would be written into every resource at
// admission, freezing today's defaults into resources that a later chart
// version would otherwise change.
//
// Descriptions come from the comments above each key: a helm-docs
// "# -- text" comment, a Bitnami "## @param path text" line anywhere in the
// file, or else the last paragraph of plain comment lines, leaving out
// commented-out YAML and "ref:" links.
//
// The notes name the values that accept any value because values.yaml shows
// no type for them.
func ValuesYAMLSchema(raw []byte) (*apiextensionsv1.JSONSchemaProps, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("values.yaml: %w", err)
	}
	t := &valuesTyper{params: map[string]string{}}
	t.collectParams(&doc)
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	if root.Kind == yaml.MappingNode {
		spec = t.typeNode("", "", root)
	}
	var notes []string
	if len(t.untyped) > 0 {
		notes = append(notes, fmt.Sprintf("values.yaml shows no type for %d value(s) (null or empty), which accept any value: %s",
			len(t.untyped), clipList(t.untyped, 12)))
	}
	return &spec, notes, nil
}

// untypedHint ends the description of a value values.yaml shows no type for.
const untypedHint = "(Any type: the chart's values.yaml leaves it empty.)"

type valuesTyper struct {
	params  map[string]string // Bitnami @param descriptions by dotted path
	untyped []string          // paths typed as any value
}

// typeNode types the value node found at path under key.
func (t *valuesTyper) typeNode(path, key string, n *yaml.Node) apiextensionsv1.JSONSchemaProps {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		p := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue // a YAML merge key; its keys are accepted as unknown ones
			}
			if p.Properties == nil {
				p.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
			}
			sub := t.typeNode(path+"."+k.Value, k.Value, v)
			sub.Description = t.describe(path+"."+k.Value, k)
			if sub.Type == "" && !sub.XIntOrString {
				// kubectl explain shows a field of any type as <Object>.
				sub.Description = strings.TrimSpace(sub.Description + " " + untypedHint)
			}
			p.Properties[k.Value] = sub
		}
		return p
	case yaml.SequenceNode:
		p := apiextensionsv1.JSONSchemaProps{Type: "array"}
		var item *apiextensionsv1.JSONSchemaProps
		for _, e := range n.Content {
			s := t.typeNode(path+"[]", "", e)
			if item == nil {
				item = &s
			} else {
				u := unify(*item, s)
				item = &u
			}
		}
		if item == nil {
			item = ptr.To(anyValue())
		}
		p.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: item}
		return p
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!bool":
			return apiextensionsv1.JSONSchemaProps{Type: "boolean"}
		case "!!int":
			return numberType(key)
		case "!!float":
			return apiextensionsv1.JSONSchemaProps{Type: "number"}
		case "!!str", "!!timestamp", "!!binary":
			if n.Value != "" {
				return apiextensionsv1.JSONSchemaProps{Type: "string"}
			}
			// An empty string is how many charts write "unset" for a value
			// users set to a number or a map as well.
		}
	}
	if path != "" && !strings.HasSuffix(path, "[]") {
		t.untyped = append(t.untyped, strings.TrimPrefix(path, "."))
	}
	return anyValue()
}

// numberType types a number values.yaml writes as an integer. JSON Schema
// and Helm see 1 and 1.5 alike, and a user may set 1.5 where values.yaml
// says 1 (a ratio, a timeout in seconds, a version such as 1.3), so a number
// is a number. The exceptions are keys named like the Kubernetes API's own
// integer fields (ports, replicas, counts, UIDs and GIDs, *Seconds, the
// probes' thresholds, history and backoff limits, weight), which a chart passes through to a field where Kubernetes
// refuses a fraction: there `kubectl explain` says integer and the CRD
// refuses at once what the release would fail on; and the API's
// int-or-string fields (maxUnavailable, maxSurge, minAvailable, targetPort),
// which also take "25%".
func numberType(key string) apiextensionsv1.JSONSchemaProps {
	k := strings.ToLower(key)
	switch k {
	case "maxunavailable", "maxsurge", "minavailable", "targetport":
		return apiextensionsv1.JSONSchemaProps{XIntOrString: true,
			AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}}
	case "runasuser", "runasgroup", "fsgroup", "weight":
		return apiextensionsv1.JSONSchemaProps{Type: "integer"}
	}
	for _, suffix := range []string{"port", "seconds", "replicas", "count", "historylimit", "backofflimit", "failurethreshold", "successthreshold"} {
		if strings.HasSuffix(k, suffix) {
			return apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}
	}
	return apiextensionsv1.JSONSchemaProps{Type: "number"}
}

// unify is the schema of a list item that may be a or b: their common type
// (an integer and a number are a number; two objects have the properties of
// both), else any value. Descriptions are a's.
func unify(a, b apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	switch {
	case a.XIntOrString && (b.XIntOrString || b.Type == "integer" || b.Type == "string"):
		return a
	case b.XIntOrString && (a.Type == "integer" || a.Type == "string"):
		return b
	case a.Type == "" || b.Type == "":
		return anyValue()
	case a.Type == b.Type:
	case (a.Type == "integer" || a.Type == "number") && (b.Type == "integer" || b.Type == "number"):
		a.Type = "number"
		return a
	default:
		return anyValue()
	}
	switch a.Type {
	case "object":
		for name, pb := range b.Properties {
			if pa, ok := a.Properties[name]; ok {
				u := unify(pa, pb)
				if u.Description == "" {
					u.Description = pa.Description
				}
				a.Properties[name] = u
			} else {
				if a.Properties == nil {
					a.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
				}
				a.Properties[name] = pb
			}
		}
	case "array":
		u := unify(*a.Items.Schema, *b.Items.Schema)
		if len(a.Items.Schema.Properties) == 0 && a.Items.Schema.Type == "" {
			u = *b.Items.Schema // an empty list agrees with any other
		}
		a.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &u}
	}
	return a
}

// collectParams reads every Bitnami "@param path [type] text" comment line.
func (t *valuesTyper) collectParams(n *yaml.Node) {
	for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
		for _, line := range commentLines(c) {
			if m := paramLine.FindStringSubmatch(line); m != nil {
				t.params["."+m[1]] = strings.TrimSpace(m[2])
			}
		}
	}
	for _, c := range n.Content {
		t.collectParams(c)
	}
}

var (
	paramLine = regexp.MustCompile(`^@param\s+(\S+)\s+(?:\[[^\]]*\]\s*)?(.*)$`)
	// yamlLine matches commented-out YAML ("key: value", "- item") and
	// "ref: https://..." links, which describe nothing.
	yamlLine = regexp.MustCompile(`^(-\s|[\w.\-/"']+:(\s+[^\s]+)?\s*$)`)
	// typeHint is helm-docs' "(type)" before a description.
	typeHint = regexp.MustCompile(`^\([\w\[\]/ ]+\)\s*`)
)

// describe is the description of the value under key k: its Bitnami
// @param line, else the comment above the key.
func (t *valuesTyper) describe(path string, k *yaml.Node) string {
	if d := t.params[path]; d != "" {
		return d
	}
	return commentDescription(k.HeadComment)
}

// commentDescription reads one paragraph from the comment lines above a key:
// from its last helm-docs "-- " line on, else its last paragraph of prose.
func commentDescription(comment string) string {
	lines := commentLines(comment)
	start := -1
	for i, l := range lines {
		if l == "--" || strings.HasPrefix(l, "-- ") {
			start = i
		}
	}
	if start >= 0 {
		first := strings.TrimSpace(strings.TrimPrefix(lines[start], "--"))
		out := []string{typeHint.ReplaceAllString(first, "")}
		for _, l := range lines[start+1:] {
			if l == "" || strings.HasPrefix(l, "@") {
				break
			}
			out = append(out, l)
		}
		return strings.TrimSpace(strings.Join(out, " "))
	}
	var paras [][]string
	var cur []string
	for _, l := range append(lines, "") {
		switch {
		case l == "":
			if len(cur) > 0 {
				paras = append(paras, cur)
			}
			cur = nil
		case strings.HasPrefix(l, "@") || yamlLine.MatchString(l):
			// Annotations, links and commented-out YAML describe nothing.
		default:
			cur = append(cur, l)
		}
	}
	if len(paras) == 0 {
		return ""
	}
	return strings.Join(paras[len(paras)-1], " ")
}

// commentLines strips the comment markers of a yaml.v3 comment; a blank line
// or a bare "#" becomes "".
func commentLines(c string) []string {
	if c == "" {
		return nil
	}
	var out []string
	for _, l := range strings.Split(c, "\n") {
		l = strings.TrimSpace(l)
		l = strings.TrimLeft(l, "#")
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// clipList joins the first max names and counts the rest.
func clipList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
