package dependents

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// The kinds of a Service's endpoints.
var (
	endpointSliceGK = schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}
	serviceGVK      = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
)

// serviceNameLabel names an EndpointSlice's Service.
const serviceNameLabel = "kubernetes.io/service-name"

// sliceOwner passes an EndpointSlice's event on as one of its Service: a
// slice's controller owner is its Service, not a resource, so the resource
// a slice's change concerns is the Service's owner. The Service is read
// from the cache, and only when the cache watches Services (it does for
// every release with a Service): a read of a kind it does not watch would
// start an informer. A slice whose Service the cache does not hold (not a
// release's object) wakes nothing. The EndpointSlice controller copies the
// Service's labels onto its slices, so the slices of a release's Service
// are in the cache, and only those.
type sliceOwner struct {
	cache   cache.Cache
	tracker *Tracker
	inner   handler.EventHandler
}

func (h sliceOwner) Create(ctx context.Context, e event.CreateEvent, q queue) {
	h.pass(ctx, e.Object, q)
}

func (h sliceOwner) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	h.pass(ctx, e.ObjectNew, q)
}

func (h sliceOwner) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.pass(ctx, e.Object, q)
}

func (h sliceOwner) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	h.pass(ctx, e.Object, q)
}

func (h sliceOwner) pass(ctx context.Context, slice client.Object, q queue) {
	if slice == nil || !h.tracker.isWatched(serviceGVK) {
		return
	}
	name := slice.GetLabels()[serviceNameLabel]
	if name == "" {
		return
	}
	svc := &unstructured.Unstructured{}
	svc.SetGroupVersionKind(serviceGVK)
	if err := h.cache.Get(ctx, client.ObjectKey{Namespace: slice.GetNamespace(), Name: name}, svc); err != nil {
		return
	}
	h.inner.Generic(ctx, event.GenericEvent{Object: svc}, q)
}
