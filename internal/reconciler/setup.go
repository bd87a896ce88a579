package reconciler

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/helmapp/helm-app-operator/internal/dependents"
)

// SetupWithManager registers the reconciler as the controller of its kind.
// Only changes a reconcile must act on start one: spec (generation), labels,
// annotations and the start of a deletion. The operator's own status and
// finalizer writes change none of them, so they do not trigger a reconcile.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, selector *metav1.LabelSelector) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.kind.GVK)

	preds := []predicate.Predicate{r.leaving(), predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		deletionStarted(),
	)}
	if selector != nil && (len(selector.MatchLabels) > 0 || len(selector.MatchExpressions) > 0) {
		p, err := predicate.LabelSelectorPredicate(*selector)
		if err != nil {
			return fmt.Errorf("selector of %s: %w", r.kind.GVK.Kind, err)
		}
		preds = append(preds, p)
	}
	// Last, so that it sees the generations of the selected resources.
	preds = append(preds, r.superseding())
	if concurrency < 1 {
		concurrency = 1
	}
	bld := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.kind.GVK.Kind+"."+r.kind.GVK.Group)).
		For(obj, builder.WithPredicates(preds...)).
		// Helm's storage may change behind the operator's back (recordwatch.go).
		WatchesMetadata(&corev1.Secret{}, r.storageEvents(mgr.GetCache())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency})
	if r.svc.Access != nil {
		// A grant ends a refusal at once (rbac.go).
		bld = bld.WatchesMetadata(&rbacv1.Role{}, r.rbacEvents()).
			WatchesMetadata(&rbacv1.RoleBinding{}, r.rbacEvents())
	}
	var selected labels.Selector
	if selector != nil {
		s, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return fmt.Errorf("selector of %s: %w", r.kind.GVK.Kind, err)
		}
		selected = s
	}
	if err := r.setupRollout(mgr, bld, selected); err != nil {
		return err
	}
	c, err := bld.Build(r)
	if err != nil {
		return err
	}
	if err := r.setupSources(mgr, c, obj); err != nil {
		return err
	}
	if r.dependentCache != nil {
		if r.tracker == nil {
			r.tracker = dependents.NewTracker()
		}
		r.dependents = dependents.NewWatcher(r.dependentCache, c, r.tracker, mgr.GetScheme(), mgr.GetRESTMapper(), r.kind.GVK)
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
