package crdgen

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// StatusSchema returns the schema of .status, the same for every kind: the
// status contract of the operator (internal/status, docs/status.md). status
// itself preserves unknown fields so that what other controllers or hooks
// write there survives the apiserver's pruning.
func StatusSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type:                   "object",
		Description:            "Status of the Helm release reconciled from this resource, written by the operator. Fields not described here are kept.",
		XPreserveUnknownFields: ptr.To(true),
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"observedGeneration": int64Prop("The metadata.generation this status describes."),
			"lastAttemptedGeneration": int64Prop(
				"The metadata.generation of the latest Helm install or upgrade attempt."),
			"failures": int64Prop(
				"Consecutive failed attempts; a success resets it to zero."),
			"lastHandledRetry": stringProp(
				"The last value of the annotation helmapp.io/retry the operator acted on."),
			"conditions":      conditionsSchema(),
			"deployedRelease": deployedReleaseSchema(),
			"failedRelease":   failedReleaseSchema(),
			"resources":       resourcesSchema(),
			"lastTestRun":     lastTestRunSchema(),
			"drift":           driftSchema(),
			"valuesSources":   valuesSourcesSchema(),
			"history":         historySchema(),
			"lastHandledTest": stringProp(
				"The last value of the annotation helmapp.io/test the operator acted on."),
			"phase": stringProp(
				"Ready's verdict in one string, for the OpenShift console's Status column: Ready, \"Stalled: <reason>\", \"NotReady: <reason>\" or \"Progressing[: <reason>]\". Derived from the Ready condition, which is the contract."),
		},
	}
}

func conditionsSchema() apiextensionsv1.JSONSchemaProps {
	// The shape and validation of metav1.Condition, as the apiserver's own
	// types declare it.
	condition := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "One aspect of the current state of the resource (the metav1.Condition shape).",
		Required:    []string{"type", "status", "lastTransitionTime", "reason", "message"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type": {
				Type:        "string",
				Description: "Type of the condition in CamelCase, e.g. Ready, Reconciling, Stalled, Deployed, ReleaseFailed.",
				MaxLength:   ptr.To[int64](316),
				Pattern:     `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`,
			},
			"status": {
				Type:        "string",
				Description: "Status of the condition.",
				Enum:        jsonStrings("True", "False", "Unknown"),
			},
			"observedGeneration": func() apiextensionsv1.JSONSchemaProps {
				p := int64Prop("The metadata.generation the condition was set from.")
				p.Minimum = ptr.To[float64](0)
				return p
			}(),
			"lastTransitionTime": {
				Type:        "string",
				Format:      "date-time",
				Description: "When the condition last changed from one status to another.",
			},
			"reason": {
				Type:        "string",
				Description: "Machine-readable CamelCase reason for the condition's last transition.",
				MinLength:   ptr.To[int64](1),
				MaxLength:   ptr.To[int64](1024),
				Pattern:     `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
			},
			"message": {
				Type:        "string",
				Description: "Human-readable message with details about the transition.",
				MaxLength:   ptr.To[int64](32768),
			},
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:         "array",
		Description:  "Conditions of the resource; Ready summarizes the others.",
		Items:        &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
		XListType:    ptr.To("map"),
		XListMapKeys: []string{"type"},
	}
}

func deployedReleaseSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The Helm release now deployed, as read back from Helm's storage; absent before the first successful install and after an uninstall.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name":           stringProp("Name of the Helm release."),
			"namespace":      stringProp("Namespace of the Helm release."),
			"revision":       intProp("Revision of the deployed release."),
			"chart":          stringProp("Name of the chart deployed."),
			"chartVersion":   stringProp("Version of the chart deployed."),
			"appVersion":     stringProp("App version of the chart deployed."),
			"status":         stringProp("Helm's status of the release, e.g. deployed."),
			"firstDeployed":  timeProp("When the first revision of the release was deployed."),
			"lastDeployed":   timeProp("When this revision was deployed."),
			"valuesDigest":   stringProp("HMAC-SHA256 of the values the release was rendered with, under the operator's key (never the values themselves)."),
			"manifestDigest": stringProp("Digest of the release's rendered manifest."),
		},
	}
}

func failedReleaseSchema() apiextensionsv1.JSONSchemaProps {
	action := stringProp("The action that failed.")
	action.Enum = jsonStrings("install", "upgrade", "uninstall", "reconcile")
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The latest failed attempt; kept after a later success for inspection.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"revision": intProp("Revision Helm stored for the failed attempt; absent when Helm stored none."),
			"action":   action,
			"reason":   stringProp("Machine-readable CamelCase reason of the failure."),
			"message":  stringProp("Human-readable description of the failure."),
			"time":     timeProp("When the attempt failed."),
		},
	}
}

func lastTestRunSchema() apiextensionsv1.JSONSchemaProps {
	hook := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "A test hook of the run.",
		Required:    []string{"name", "phase"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"name":        stringProp("Name of the test hook."),
			"phase":       stringProp("Helm's phase of the hook: Succeeded, Failed, Running, Unknown, or NotRun when an earlier hook failed."),
			"startedAt":   timeProp("When the hook started."),
			"completedAt": timeProp("When the hook completed."),
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The last run of the chart's test hooks (watches.yaml test). Never holds the test pods' logs.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"revision":       intProp("The release revision tested."),
			"startedAt":      timeProp("When the run started."),
			"completedAt":    timeProp("When the run completed; absent while it runs."),
			"ignoreFailures": {Type: "boolean", Description: "The watch's test.ignoreFailures at the run: a failed test then does not make the resource not Ready."},
			"hooks": {
				Type:        "array",
				Description: "The chart's test hooks, in the order Helm runs them.",
				Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &hook},
			},
		},
	}
}

func driftSchema() apiextensionsv1.JSONSchemaProps {
	field := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "A field that differed from the manifest, and the writer managedFields name as its owner before the correction. Never its value.",
		Required:    []string{"path"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"path":        stringProp("JSON pointer (RFC 6901) to the field in the object; list elements by their index in the live object."),
			"manager":     stringProp("Field manager of the managedFields entry that owns the field; absent when none does (the field was removed)."),
			"operation":   stringProp("Operation of that entry: Update or Apply."),
			"subresource": stringProp("Subresource of that entry, e.g. scale, status; absent for the object itself."),
			"time":        timeProp("Time of that entry: the manager's last write that changed any of its fields, to the second. When timeObserved is true, when the operator found the drift."),
			"timeObserved": {Type: "boolean",
				Description: "True when the entry records no time (Kubernetes records none for a write through the scale subresource) and time is when the operator found the drift."},
		},
	}
	object := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "An object of the release that drifted from its manifest.",
		Required:    []string{"apiVersion", "kind", "name"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": stringProp("API version of the object."),
			"kind":       stringProp("Kind of the object."),
			"namespace":  stringProp("Namespace of the object; empty for a cluster-scoped object."),
			"name":       stringProp("Name of the object."),
			"deleted":    {Type: "boolean", Description: "The object was deleted; nothing records by whom."},
			"fields": {
				Type:        "array",
				Description: "Fields that differed, at most 10.",
				MaxItems:    ptr.To[int64](10),
				Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &field},
			},
			"moreFields": intProp("Fields that differed beyond those listed."),
		},
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "The drift the last re-apply found in the deployed release's objects (see the Drifted condition); absent before the first drift and after a new revision is deployed.",
		Required:    []string{"detectedAt", "corrected"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"detectedAt": timeProp("When this drift was first found."),
			"corrected":  {Type: "boolean", Description: "True once the operator restored the objects (drift mode correct)."},
			"objects": {
				Type:        "array",
				Description: "Objects that drifted, at most 10, in the manifest's order.",
				MaxItems:    ptr.To[int64](10),
				Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &object},
			},
			"moreObjects": intProp("Objects that drifted beyond those listed."),
		},
	}
}

func resourcesSchema() apiextensionsv1.JSONSchemaProps {
	notReady := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "An object of the release that is not ready.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": stringProp("API version of the object."),
			"kind":       stringProp("Kind of the object."),
			"namespace":  stringProp("Namespace of the object; empty for a cluster-scoped object."),
			"name":       stringProp("Name of the object."),
			"status":     stringProp("Readiness status of the object, e.g. InProgress, Failed, NotFound."),
			"message":    stringProp("Why the object is not ready."),
		},
	}
	total := intProp("Number of objects in the deployed release.")
	total.Minimum = ptr.To[float64](0)
	ready := intProp("Number of those objects that are ready.")
	ready.Minimum = ptr.To[float64](0)
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "Readiness of the objects of the deployed release.",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"total": total,
			"ready": ready,
			"notReady": {
				Type:        "array",
				Description: "Objects that are not ready, at most 10.",
				MaxItems:    ptr.To[int64](10),
				Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &notReady},
			},
			"warnings": {
				Type:        "array",
				Description: "Objects that are not ready but do not count towards readiness (reported, not counted), at most 10.",
				MaxItems:    ptr.To[int64](10),
				Items:       &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &notReady},
			},
		},
	}
}

func stringProp(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
}

func intProp(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "integer", Description: desc}
}

func int64Prop(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64", Description: desc}
}

func timeProp(desc string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time", Description: desc}
}

func jsonStrings(values ...string) []apiextensionsv1.JSON {
	out := make([]apiextensionsv1.JSON, 0, len(values))
	for _, v := range values {
		out = append(out, apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)})
	}
	return out
}
