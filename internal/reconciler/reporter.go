package reconciler

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Reporter is told how each reconcile ended (internal/metrics implements it).
type Reporter interface {
	// Reconciled is called once per reconcile, after the status write, with
	// the status computed for obj, the reconcile's failure (nil on success)
	// and whether it was held (ran nothing).
	Reconciled(kind string, obj client.Object, s status.Status, err *status.Failure, held bool)
	// Forget is called when the resource is gone or no longer the operator's.
	Forget(kind, namespace, name string)
}

// report tells the Reporter, if any, how the reconcile of obj ended; gone
// means the resource is gone.
func (r *Reconciler) report(obj client.Object, s status.Status, out status.Outcome, gone bool) {
	if r.svc.Reporter == nil {
		return
	}
	if gone {
		r.svc.Reporter.Forget(r.kind.GVK.Kind, obj.GetNamespace(), obj.GetName())
		return
	}
	r.svc.Reporter.Reconciled(r.kind.GVK.Kind, obj, s, out.Err, out.Held)
}
