package crdgen

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// admissible drops from a spec schema converted from values.schema.json what
// the API server would refuse the whole CRD for, and returns a note for each:
//   - a default that does not fit its own schema: JSON Schema's default is an
//     annotation Helm never checks (values.yaml's defaults are what apply),
//     but a CRD's default must validate;
//   - a pattern that is not an RE2 regular expression, the API server's
//     dialect (a lookahead such as (?!...) is ECMA-262 only).
//
// It asks the API server's own CRD validation, so what it keeps is what the
// server accepts. Both drops only let more values through.
func admissible(spec *apiextensionsv1.JSONSchemaProps) []string {
	var notes []string
	for range 1000 { // each pass drops at least one keyword, or stops
		dropped := false
		for _, e := range validateSpec(spec) {
			i := strings.Index(e.Field, "properties[spec]")
			if i < 0 {
				continue
			}
			if note, ok := dropAt(spec, e.Field[i+len("properties[spec]"):]); ok {
				notes = append(notes, note)
				dropped = true
				break // paths of the other errors may have moved
			}
		}
		if !dropped {
			break
		}
	}
	return notes
}

// validateSpec runs the API server's validation of a CRD holding spec.
func validateSpec(spec *apiextensionsv1.JSONSchemaProps) []*fieldError {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *spec},
				}},
			}},
		},
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &internal, nil); err != nil {
		return nil
	}
	var out []*fieldError
	for _, e := range validation.ValidateCustomResourceDefinition(context.Background(), &internal) {
		out = append(out, &fieldError{Field: e.Field})
	}
	return out
}

type fieldError struct{ Field string }

var pathStep = regexp.MustCompile(`^\.(properties\[([^\]]*)\]|items|additionalProperties|anyOf\[(\d+)\]|default|pattern)`)

// dropAt drops the default or pattern an error path such as
// ".properties[a].items.default.x" points at, and returns its note.
func dropAt(spec *apiextensionsv1.JSONSchemaProps, rest string) (string, bool) {
	node, valuePath := spec, ""
	for {
		m := pathStep.FindStringSubmatch(rest)
		if m == nil {
			return "", false
		}
		rest = rest[len(m[0]):]
		switch {
		case strings.HasPrefix(m[1], "properties["):
			p, ok := node.Properties[m[2]]
			if !ok {
				return "", false
			}
			defer func(n *apiextensionsv1.JSONSchemaProps, name string, p *apiextensionsv1.JSONSchemaProps) {
				n.Properties[name] = *p
			}(node, m[2], &p)
			node, valuePath = &p, valuePath+"."+m[2]
		case m[1] == "items":
			if node.Items == nil || node.Items.Schema == nil {
				return "", false
			}
			node, valuePath = node.Items.Schema, valuePath+"[]"
		case m[1] == "additionalProperties":
			if node.AdditionalProperties == nil || node.AdditionalProperties.Schema == nil {
				return "", false
			}
			node, valuePath = node.AdditionalProperties.Schema, valuePath+".*"
		case strings.HasPrefix(m[1], "anyOf["):
			i, _ := strconv.Atoi(m[3])
			if i >= len(node.AnyOf) {
				return "", false
			}
			node = &node.AnyOf[i]
		case m[1] == "default":
			if node.Default == nil {
				return "", false
			}
			raw, _ := json.Marshal(node.Default)
			node.Default = nil
			return fmt.Sprintf("%s: default %s does not fit its own schema and is left out of the CRD (Helm does not check it; values.yaml's default applies)",
				displayPath(valuePath), clip(string(raw), 60)), true
		case m[1] == "pattern":
			if node.Pattern == "" {
				return "", false
			}
			pattern := node.Pattern
			node.Pattern = ""
			return fmt.Sprintf("%s: pattern %q is not an RE2 regular expression, the API server's dialect, and is not checked",
				displayPath(valuePath), pattern), true
		}
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
