package reconciler

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// EventActionSuperseded: a newer generation of the resource preempted the
// action of an older one while it waited (on a hook or on Helm's wait).
const EventActionSuperseded = "ActionSuperseded"

// superseding tells the process' registry of running actions of every
// generation the primary watch sees, so that a new spec preempts the waits
// of the action an older one runs (release.Actions.Supersede). It must see
// the events themselves: controller-runtime runs one reconcile of a resource
// at a time, so the reconcile of the new generation starts only once the
// old one has returned. It filters nothing.
func (r *Reconciler) superseding() predicate.Predicate {
	note := func(o client.Object) {
		if o != nil {
			r.svc.Actions.Supersede(o.GetNamespace(), o.GetName(), o.GetUID(), o.GetGeneration())
		}
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { note(e.Object); return true },
		UpdateFunc: func(e event.UpdateEvent) bool { note(e.ObjectNew); return true },
		DeleteFunc: func(e event.DeleteEvent) bool {
			if e.Object != nil {
				r.svc.Actions.Forget(e.Object.GetNamespace(), e.Object.GetName(), e.Object.GetUID())
			}
			return true
		},
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}

// supersededEvent emits ActionSuperseded when err says a newer generation
// preempted the action of this reconcile's.
func (r *Reconciler) supersededEvent(obj *unstructured.Unstructured, err error) {
	s := release.SupersededBy(err)
	if s == nil {
		return
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventActionSuperseded, "Preempt",
		"%s", fmt.Sprintf("Generation %d superseded the running action of generation %d while it waited on %s; generation %d runs now",
			s.To, s.From, s.Waited(), s.To))
}
