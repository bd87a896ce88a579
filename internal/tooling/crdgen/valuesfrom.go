package crdgen

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// MaxValuesFrom bounds the references of one resource's valuesFrom: each is
// one GET per reconcile.
const MaxValuesFrom = 16

// ValuesFromSchema is the schema of the top-level valuesFrom beside spec
// (release.ValuesReference): what the API server can check of a reference.
func ValuesFromSchema() apiextensionsv1.JSONSchemaProps {
	name := stringProp("Name of the Secret or ConfigMap, in the resource's namespace.")
	name.MinLength, name.MaxLength = ptr.To[int64](1), ptr.To[int64](253)
	key := stringProp("The key whose content is read; values.yaml when unset.")
	key.MaxLength, key.Pattern = ptr.To[int64](253), `^[-._a-zA-Z0-9]+$`
	path := stringProp("A --set path (a.b[0].c): the key's whole content is set there as one value. Without it the key holds YAML that is deep-merged.")
	path.MaxLength = ptr.To[int64](250)
	entry := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "A Secret's or ConfigMap's key merged into the chart's values.",
		Required:    []string{"kind", "name"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"kind": {Type: "string", Description: "Secret or ConfigMap.", Enum: jsonStrings("Secret", "ConfigMap")},
			"name": name, "valuesKey": key, "targetPath": path,
			"optional": {Type: "boolean", Description: "A missing object or key is skipped instead of holding the release back."},
			"literal": {Type: "boolean", Description: "With targetPath, the content is set as a string, verbatim (helm --set-literal, Flux's literal): " +
				"never typed as a number, boolean or null. Without targetPath it changes nothing."},
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type: "array",
		Description: "Values read from Secrets and ConfigMaps of the resource's namespace, merged in order over spec, " +
			"and the watch's overrideValues over them. Read as the resource's identity; a change upgrades the release.",
		MaxItems: ptr.To[int64](MaxValuesFrom),
		Items:    &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &entry},
	}
}

// valuesSourcesSchema is the schema of status.valuesSources.
func valuesSourcesSchema() apiextensionsv1.JSONSchemaProps {
	item := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "A reference of valuesFrom as last read.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"kind":            stringProp("Secret or ConfigMap."),
			"name":            stringProp("Name of the object."),
			"valuesKey":       stringProp("The key read."),
			"resourceVersion": stringProp("The object's resourceVersion when read; empty when it does not exist."),
			"found":           {Type: "boolean", Description: "Whether the object and its key exist."},
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "array",
		Description: "The Secrets and ConfigMaps valuesFrom references, as the last reconcile read them (never their content).",
		Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item},
	}
}
