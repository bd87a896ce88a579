package dependents

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watcher makes one controller watch the labelled objects of the kinds its
// releases contain, once per kind, and reconcile their owner on a change.
type Watcher struct {
	cache      cache.Cache
	controller controller.Controller
	handler    handler.EventHandler

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

// NewWatcher returns a Watcher for the controller of ownerGVK. c must be a
// cache restricted to Selector() (see NewCache).
func NewWatcher(c cache.Cache, ctrl controller.Controller, scheme *runtime.Scheme, mapper meta.RESTMapper, ownerGVK schema.GroupVersionKind) *Watcher {
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(ownerGVK)
	return &Watcher{
		cache:      c,
		controller: ctrl,
		handler:    handler.EnqueueRequestForOwner(scheme, mapper, owner, handler.OnlyControllerOwner()),
		watched:    map[schema.GroupVersionKind]bool{},
	}
}

// Ensure watches each kind not watched yet. A kind whose watch cannot start
// is an error: without it the status would miss that kind's changes.
func (w *Watcher) Ensure(gvks []schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, gvk := range gvks {
		if w.watched[gvk] {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		src := source.Kind[client.Object](w.cache, obj, w.handler, changesOnly())
		if err := w.controller.Watch(src); err != nil {
			return fmt.Errorf("watching %s objects of the release: %w", gvk.Kind, err)
		}
		w.watched[gvk] = true
	}
	return nil
}

// changesOnly passes creations, real updates and deletions. Creations
// matter: a watch that starts just after an install first lists the objects,
// and their readiness may have changed before that list.
func changesOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
