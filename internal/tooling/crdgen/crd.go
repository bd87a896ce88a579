// Package crdgen generates the CustomResourceDefinition of each kind in
// watches.yaml: names from the kind, .spec from the chart's values.schema.json
// (converted to a structural schema that never refuses what Helm accepts;
// what it checks less is reported by SpecNotes) or, without one, typed from
// the chart's values.yaml, and .status from the operator's status contract. Output is deterministic: the same watches file and charts give
// byte-identical files.
package crdgen

import (
	"fmt"
	"strings"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CRD returns the CustomResourceDefinition of one watches.yaml entry, whose
// chart is already loaded (watches.Load loads it).
func CRD(w watches.Watch) (*apiextensionsv1.CustomResourceDefinition, error) {
	if w.Chart == nil || w.Chart.Metadata == nil {
		return nil, fmt.Errorf("%s: chart %s is not loaded", w.GroupVersionKind, w.ChartPath)
	}
	if w.Group == "" {
		return nil, fmt.Errorf("%s: a CRD needs a group", w.GroupVersionKind)
	}
	names, err := Names(w.Kind, w.Chart.Metadata)
	if err != nil {
		return nil, err
	}
	spec, err := SpecSchema(w.Chart)
	if err != nil {
		return nil, fmt.Errorf("%s: chart %s: %w", w.GroupVersionKind, w.ChartPath, err)
	}

	root := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Description: fmt.Sprintf("%s is a release of the Helm chart %s reconciled by the helm-app-operator: "+
			"spec holds the chart's values, status reports the release.", w.Kind, w.Chart.Metadata.Name),
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {
				Type:        "string",
				Description: "APIVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
			},
			"kind": {
				Type:        "string",
				Description: "Kind is a string value representing the REST resource this object represents. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
			},
			"metadata":   {Type: "object"},
			"spec":       *spec,
			"valuesFrom": ValuesFromSchema(),
			"status":     StatusSchema(),
		},
		XValidations: apiextensionsv1.ValidationRules{NameRule()},
	}

	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{
			APIVersion: apiextensionsv1.SchemeGroupVersion.String(),
			Kind:       "CustomResourceDefinition",
		},
		ObjectMeta: metav1.ObjectMeta{Name: names.Plural + "." + w.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: w.Group,
			Names: names,
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:                     w.Version,
				Served:                   true,
				Storage:                  true,
				Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: PrinterColumns(),
			}},
		},
	}, nil
}

// MaxNameLength is Helm's limit on release names; a resource's name is its
// release's name.
const MaxNameLength = 53

// NameRule is the CEL rule that refuses, at admission, a resource whose name
// cannot be the name of its Helm release.
func NameRule() apiextensionsv1.ValidationRule {
	return apiextensionsv1.ValidationRule{
		Rule: fmt.Sprintf("size(self.metadata.name) <= %d", MaxNameLength),
		Message: fmt.Sprintf("metadata.name must be at most %d characters: it is the name of the resource's Helm release, "+
			"and Helm limits release names to %d", MaxNameLength, MaxNameLength),
	}
}

// SpecSchema returns the schema of .spec for a chart, described as the
// chart's values: its values.schema.json converted by ConvertValuesSchema,
// or, for a chart without one, a schema typed from its values.yaml (see
// ValuesYAMLSchema).
func SpecSchema(ch *chart.Chart) (*apiextensionsv1.JSONSchemaProps, error) {
	spec, _, err := specSchema(ch)
	return spec, err
}

// SpecNotes returns what the chart's spec schema checks less strictly than
// Helm, one line each naming the value's path and why ("values.x: ..."): the
// constructs of its values.schema.json a CRD cannot express, or, for a chart
// typed from values.yaml, the values whose type values.yaml does not show.
// They are for the author to read; none is an error.
func SpecNotes(ch *chart.Chart) ([]string, error) {
	_, notes, err := specSchema(ch)
	return notes, err
}

func specSchema(ch *chart.Chart) (*apiextensionsv1.JSONSchemaProps, []string, error) {
	md := ch.Metadata
	desc := fmt.Sprintf("Values for the Helm chart %s %s", md.Name, md.Version)
	if md.AppVersion != "" {
		desc += fmt.Sprintf(" (app version %s)", md.AppVersion)
	}
	desc += "."
	if d := strings.TrimSpace(md.Description); d != "" {
		desc += " " + strings.TrimSuffix(d, ".") + "."
	}
	if len(ch.Schema) == 0 {
		spec, notes, err := ValuesYAMLSchema(valuesFile(ch))
		if err != nil {
			return nil, nil, err
		}
		spec.Description = desc + " The chart has no values.schema.json: the types below are those of its values.yaml, " +
			"keys it does not list are accepted too, and omitted values take the chart's defaults."
		return spec, notes, nil
	}
	spec, notes, err := ConvertValuesSchema(ch.Schema)
	if err != nil {
		return nil, nil, err
	}
	relaxRequired(spec, ch.Values)
	notes = append(notes, admissible(spec)...)
	spec.Description = desc + " Omitted values take the chart's defaults."
	return spec, notes, nil
}

// valuesFile is the chart's values.yaml as written (with its comments).
func valuesFile(ch *chart.Chart) []byte {
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" {
			return f.Data
		}
	}
	return nil
}

// relaxRequired drops from each object's required list the keys the chart's
// values.yaml sets there: Helm checks the schema
// against the chart's values merged with the user's, so such a key is always
// present for Helm, and a resource may leave it out.
func relaxRequired(s *apiextensionsv1.JSONSchemaProps, values map[string]any) {
	var kept []string
	for _, r := range s.Required {
		if v, set := values[r]; set && v != nil {
			continue
		}
		kept = append(kept, r)
	}
	s.Required = kept
	for name, prop := range s.Properties {
		if sub, ok := values[name].(map[string]any); ok {
			relaxRequired(&prop, sub)
			s.Properties[name] = prop
		}
	}
}

// PrinterColumns returns the columns `kubectl get` shows for every kind.
func PrinterColumns() []apiextensionsv1.CustomResourceColumnDefinition {
	return []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`,
			Description: "Whether the release is deployed and its objects are ready."},
		{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].reason`,
			Description: "Reason of the Ready condition."},
		{Name: "Revision", Type: "integer", JSONPath: ".status.deployedRelease.revision",
			Description: "Revision of the deployed Helm release."},
		{Name: "Chart Version", Type: "string", JSONPath: ".status.deployedRelease.chartVersion",
			Description: "Version of the deployed chart."},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
}
