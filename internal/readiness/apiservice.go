package readiness

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// apiServiceKind is APIService, the registration of an aggregated API
// (metrics-server, custom metrics adapters, aggregated API servers) with
// the API server.
var apiServiceKind = schema.GroupKind{Group: "apiregistration.k8s.io", Kind: "APIService"}

// apiServiceVerdict judges an APIService by the Available condition the API
// server's availability controller writes, which kstatus does not read (it
// calls every APIService Current): True is Current; False, Unknown or not
// reported yet is InProgress with reason status.ReasonAPIServiceUnavailable
// and the API server's own reason and message, "Available=False
// MissingEndpoints: endpoints for service/api in "ns" have no addresses
// ...", marked foreign. InProgress, not Failed: the API server checks again
// on its own, and an API whose pods are still starting becomes available
// with no change to the release; readinessTimeout turns endless waiting
// into Stalled. It reads nothing but u.
func apiServiceVerdict(u *unstructured.Unstructured) verdict {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Available" {
			continue
		}
		cst, _ := m["status"].(string)
		if cst == "True" {
			return verdict{Status: kstatus.CurrentStatus}
		}
		if cst == "" {
			cst = "Unknown"
		}
		msg := "Available=" + cst
		if r, _ := m["reason"].(string); r != "" {
			msg += " " + status.Foreign(r)
		}
		if text, _ := m["message"].(string); text != "" {
			msg += ": " + status.Foreign(text)
		}
		return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonAPIServiceUnavailable, Message: msg}
	}
	return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonAPIServiceUnavailable,
		Message: "Available not reported yet by the API server"}
}
