package readiness

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// EndpointSliceGVK is the kind the Service and webhook rules read: the
// reconciler watches it (through the cache of the releases' objects) for a
// release with a Service or a webhook configuration (ReadKinds).
var EndpointSliceGVK = schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}

// Labels the EndpointSlice controller sets on a Service's slices itself,
// never copied from the Service's labels.
const (
	serviceNameLabel = "kubernetes.io/service-name"
	sliceManagerKey  = "endpointslice.kubernetes.io/managed-by"
	headlessLabel    = "service.kubernetes.io/headless"
)

// Messages of the address rule.
const noAddressMessage = "no load-balancer address yet"

// serviceRule judges a Service: one with a selector (not ExternalName) needs
// a ready endpoint (NoReadyEndpoints), and a LoadBalancer one an address
// (NoAddress, advisory unless c.RequireAddresses). ok is false when it finds
// nothing wrong, or when its slices could not be read (kstatus' verdict
// stands; logged).
func (c Checker) serviceRule(ctx context.Context, u *unstructured.Unstructured) (verdict, bool) {
	typ, _, _ := unstructured.NestedString(u.Object, "spec", "type")
	if typ == "ExternalName" {
		return verdict{}, false
	}
	if selector, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector"); len(selector) > 0 {
		eps, err := serviceEndpoints(ctx, c.Reader, u)
		if err != nil {
			c.ruleReadFailed(ctx, u, err)
			return verdict{}, false
		}
		if eps.ready == 0 {
			return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonNoReadyEndpoints, Message: eps.noneReady()}, true
		}
	}
	if typ == "LoadBalancer" && !hasAddress(u) {
		return c.noAddress(), true
	}
	return verdict{}, false
}

// ingressRule judges an Ingress: it needs an address (NoAddress, advisory
// unless c.RequireAddresses).
func (c Checker) ingressRule(u *unstructured.Unstructured) (verdict, bool) {
	if hasAddress(u) {
		return verdict{}, false
	}
	return c.noAddress(), true
}

func (c Checker) noAddress() verdict {
	return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonNoAddress, Message: noAddressMessage, Advisory: !c.RequireAddresses}
}

// hasAddress tells whether u's status.loadBalancer.ingress has an entry
// with an IP or a hostname.
func hasAddress(u *unstructured.Unstructured) bool {
	ingress, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
	for _, raw := range ingress {
		m, _ := raw.(map[string]any)
		if field(m, "ip") != "" || field(m, "hostname") != "" {
			return true
		}
	}
	return false
}

// endpoints counts what a Service's EndpointSlices list.
type endpoints struct {
	slices, ready, notReady int
}

// noneReady says why a Service with these endpoints has no ready one.
func (e endpoints) noneReady() string {
	switch {
	case e.slices == 0:
		return "no ready endpoint: no EndpointSlice lists it yet"
	case e.notReady == 0:
		return "no ready endpoint: no running pod matches its selector"
	case e.notReady == 1:
		return "no ready endpoint: 1 endpoint not ready"
	default:
		return fmt.Sprintf("no ready endpoint: %d endpoints not ready", e.notReady)
	}
}

// serviceEndpoints counts the endpoints of svc's EndpointSlices (label
// kubernetes.io/service-name). An endpoint is ready unless its
// conditions.ready is false (unset means ready, as the API says).
//
// The EndpointSlice controller copies a Service's labels onto its slices,
// so the slices of a Service with a selector are selected by its labels as
// well: those of a release's Service carry the labels the cache of the
// releases' objects selects by, and dependents.Reader serves the list from
// that cache, without a request. Slices of a Service without a selector are
// written by whoever manages its endpoints, with labels of their own: they
// are selected by the service name alone (read live).
func serviceEndpoints(ctx context.Context, r client.Reader, svc *unstructured.Unstructured) (endpoints, error) {
	sel := client.MatchingLabels{}
	if s, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector"); len(s) > 0 {
		for k, v := range svc.GetLabels() {
			if k != serviceNameLabel && k != sliceManagerKey && k != headlessLabel {
				sel[k] = v
			}
		}
	}
	sel[serviceNameLabel] = svc.GetName()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(EndpointSliceGVK.GroupVersion().WithKind("EndpointSliceList"))
	if err := r.List(ctx, list, client.InNamespace(svc.GetNamespace()), sel); err != nil {
		return endpoints{}, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", svc.GetNamespace(), svc.GetName(), err)
	}
	var e endpoints
	for _, slice := range list.Items {
		if slice.GetDeletionTimestamp() != nil {
			continue
		}
		e.slices++
		eps, _, _ := unstructured.NestedSlice(slice.Object, "endpoints")
		for _, raw := range eps {
			ep, _ := raw.(map[string]any)
			if ready, found, _ := unstructured.NestedBool(ep, "conditions", "ready"); found && !ready {
				e.notReady++
				continue
			}
			e.ready++
		}
	}
	return e, nil
}
