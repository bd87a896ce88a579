package crdgen

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// historySchema is the schema of status.history: the revisions the
// operator made, newest first, each with its causes (internal/status,
// history.go).
func historySchema() apiextensionsv1.JSONSchemaProps {
	cause := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "One reason for the revision; it names keys and objects, never a value.",
		Required:    []string{"type"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type": {Type: "string", Description: "The cause, from a fixed list.",
				Enum: jsonStrings(status.CauseTypes...)},
			"detail":    stringProp("What changed: generations, the top-level values keys, a reference and its resourceVersions, chart versions."),
			"initiator": stringProp("Who made the change (a field manager), when known."),
		},
	}
	entry := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "A revision the operator made.",
		Required:    []string{"revision", "action", "causes"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"revision":     int64Prop("The Helm revision."),
			"action":       {Type: "string", Description: "The Helm action.", Enum: jsonStrings(status.ActionInstall, status.ActionUpgrade, status.ActionRollback, status.ActionUninstall)},
			"chartVersion": stringProp("The chart version of the revision."),
			"valuesDigest": stringProp("The digest of the revision's values, as deployedRelease.valuesDigest."),
			"status":       stringProp("Helm's status of the revision when the action ended."),
			"started":      timeProp("When the action started."),
			"finished":     timeProp("When the action ended."),
			"causes": {Type: "array", Description: "Why the operator made the revision; at least one.",
				MinItems: ptr.To[int64](1), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &cause}},
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type: "array",
		Description: fmt.Sprintf("The revisions the operator made, newest first, each with why it made it; at most %d entries and %d bytes of JSON, the oldest dropped first.",
			status.MaxHistoryEntries, status.MaxHistoryBytes),
		MaxItems: ptr.To[int64](status.MaxHistoryEntries),
		Items:    &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &entry},
	}
}
