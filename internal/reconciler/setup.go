package reconciler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// SetupWithManager registers the reconciler as the controller of its kind.
// Only changes a reconcile must act on start one: spec (generation), labels,
// annotations and the start of a deletion. The operator's own status and
// finalizer writes change none of them, so they do not trigger a reconcile.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, selector *metav1.LabelSelector) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.opts.GVK)

	preds := []predicate.Predicate{predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		deletionStarted(),
	)}
	if selector != nil && (len(selector.MatchLabels) > 0 || len(selector.MatchExpressions) > 0) {
		p, err := predicate.LabelSelectorPredicate(*selector)
		if err != nil {
			return fmt.Errorf("selector of %s: %w", r.opts.GVK.Kind, err)
		}
		preds = append(preds, p)
	}
	if concurrency < 1 {
		concurrency = 1
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.opts.GVK.Kind+"."+r.opts.GVK.Group)).
		For(obj, builder.WithPredicates(preds...)).
		// A release whose name a resource waits for may free up at any time.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.waitingForRelease(mgr.GetCache())),
			builder.WithPredicates(releaseRecordDeleted())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Build(r)
	if err != nil {
		return err
	}
	if r.dependentCache != nil {
		r.dependents = dependents.NewWatcher(r.dependentCache, c, mgr.GetScheme(), mgr.GetRESTMapper(), r.opts.GVK)
	}
	return nil
}

// deletionStarted passes the update that sets deletionTimestamp.
func deletionStarted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}

// Helm's Secret storage labels each release record owner=helm and
// name=<release>; ReleaseRecordSelector selects those records, and the
// operator's cache holds only their metadata (see internal/operator).
var ReleaseRecordSelector = labels.SelectorFromSet(labels.Set{"owner": "helm"})

// releaseRecordDeleted passes the deletion of a Helm release record.
func releaseRecordDeleted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			return ReleaseRecordSelector.Matches(labels.Set(e.Object.GetLabels()))
		},
	}
}

// waitingForRelease maps a deleted release record to the resource of the
// release's name, when that resource is stalled because the name was taken:
// the name may be free now. Records deleted by the resource's own upgrades
// (history pruning) or uninstall wake nobody.
func (r *Reconciler) waitingForRelease(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()["name"]}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.opts.GVK)
		if key.Name == "" || c.Get(ctx, key, u) != nil {
			return nil
		}
		st := meta.FindStatusCondition(status.FromObject(u).Conditions, status.TypeStalled)
		if st == nil || st.Status != metav1.ConditionTrue || st.Reason != status.ReasonReleaseNameConflict {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
}
