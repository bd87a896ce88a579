package reconciler

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// rbacSettle is where the backoff of the refusals met after a change to
// the namespace's RBAC starts, if the retry backoff starts later: the API
// server's authorizer and the operator's answers of access reviews (cached
// for a few seconds) may not hold a grant yet when the change wakes the
// resource, and the retries that follow must not wait the whole backoff.
const rbacSettle = 5 * time.Second

// settled bounds d, the backoff of the n-th refusal since the namespace's
// RBAC changed: at most rbacSettle doubling with each refusal.
func settled(d time.Duration, n int64) time.Duration {
	s := rbacSettle
	for i := int64(1); i < n && s < d; i++ {
		s *= 2
	}
	return min(d, s)
}

// rbacEvents handles the changes to the Roles and RoleBindings of the
// watched namespaces, seen through a metadata-only watch: each created,
// changed or deleted one reconciles at once the resources of its namespace
// whose install or upgrade was refused for a missing permission, whatever
// their backoff; a grant then takes effect without any edit of the
// resource. Nothing else is woken: the objects listed when the watch
// starts, and every change in a namespace without a refused resource, cost
// a map lookup.
func (r *Reconciler) rbacEvents() handler.EventHandler {
	wake := func(obj client.Object, q queue) {
		for _, key := range r.gate.rbacChanged(obj.GetNamespace()) {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if !e.IsInInitialList {
				wake(e.Object, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				wake(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) { wake(e.Object, q) },
	}
}
