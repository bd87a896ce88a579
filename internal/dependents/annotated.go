package dependents

import (
	"context"
	"strings"

	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ownerHandler enqueues the owner of a release's object: the controller
// named by its owner reference, or, for an object that cannot carry one,
// the resource its operator-lib owner annotations name
// (operator-sdk/primary-resource: <namespace>/<name>,
// operator-sdk/primary-resource-type: <Kind>.<group>). The operator's
// post-renderer writes the annotations on each object Kubernetes allows no
// owner reference to the resource on — a cluster-scoped one (a chart's
// ClusterRole, webhook configuration, CSIDriver) — and on one that asks to
// be kept. Without them, the deletion or change of a release's
// cluster-scoped object reached its resource only at its next periodic
// reconcile (issue 39, found on the real charts).
//
// A namespaced object's annotations are followed only to a resource of its
// own namespace: whoever may label and annotate objects in one namespace
// must not wake the resources of another.
type ownerHandler struct {
	byReference handler.EventHandler
	owner       schema.GroupKind
}

func (h ownerHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	h.byReference.Create(ctx, e, q)
	h.byAnnotation(e.Object, q)
}

func (h ownerHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	h.byReference.Update(ctx, e, q)
	h.byAnnotation(e.ObjectOld, q)
	h.byAnnotation(e.ObjectNew, q)
}

func (h ownerHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.byReference.Delete(ctx, e, q)
	h.byAnnotation(e.Object, q)
}

func (h ownerHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	h.byReference.Generic(ctx, e, q)
	h.byAnnotation(e.Object, q)
}

// byAnnotation adds the request of the resource obj's owner annotations
// name, if they name one of the owner kind that obj may wake.
func (h ownerHandler) byAnnotation(obj client.Object, q queue) {
	if obj == nil {
		return
	}
	a := obj.GetAnnotations()
	if a[sdkhandler.TypeAnnotation] != h.owner.String() {
		return
	}
	ns, name, ok := strings.Cut(a[sdkhandler.NamespacedNameAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return
	}
	if obj.GetNamespace() != "" && obj.GetNamespace() != ns {
		return
	}
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
}
