package dependents

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Watcher makes one controller watch the labelled objects of the kinds its
// releases contain, once per kind, and reconcile their owner on a change the
// owner's reconciles have not read yet (see Tracker).
//
// The cache holds the whole objects, not only their metadata: the same
// objects are what Reader serves readiness and the drift check from, so one
// informer per kind serves both, bounded by what the operator deployed.
type Watcher struct {
	cache      cache.Cache
	controller controller.Controller
	tracker    *Tracker
	owner      schema.GroupKind
	handler    handler.EventHandler
	log        logr.Logger

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

// NewWatcher returns a Watcher for the controller of ownerGVK. c must be a
// cache restricted to Selector(); t is shared with the Reader of c.
func NewWatcher(c cache.Cache, ctrl controller.Controller, t *Tracker, scheme *runtime.Scheme, mapper meta.RESTMapper, ownerGVK schema.GroupVersionKind) *Watcher {
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(ownerGVK)
	return &Watcher{
		cache:      c,
		controller: ctrl,
		tracker:    t,
		owner:      ownerGVK.GroupKind(),
		handler: ownerHandler{owner: ownerGVK.GroupKind(),
			byReference: handler.EnqueueRequestForOwner(scheme, mapper, owner, handler.OnlyControllerOwner())},
		watched: map[schema.GroupVersionKind]bool{},
		log:     logf.Log.WithName("dependents").WithValues("owner", ownerGVK.Kind),
	}
}

// Ensure watches each kind not watched yet. A kind whose watch cannot start
// is an error: without it the status would miss that kind's changes.
//
// It returns once each new watch has listed its kind and passed the list
// to the handler, or after SyncWait: controller-runtime does not wait for a
// watch added to a running controller, and an object of the release
// deleted between Ensure and that list (right after the install that
// called Ensure) would be missing from the list with no deletion event to
// say so, so nothing would restore it before the periodic reconcile (found
// under load by TestDeletedClusterScopedObjectWakesItsResource). A watch
// that has not synced by then (a kind the operator may not list) goes on
// trying, as before; Ensure does not wait for it again.
func (w *Watcher) Ensure(gvks []schema.GroupVersionKind) error {
	var started []syncer
	w.mu.Lock()
	for _, gvk := range gvks {
		if w.watched[gvk] {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		inner := w.handler
		if gvk.GroupKind() == endpointSliceGK {
			inner = sliceOwner{cache: w.cache, tracker: w.tracker, inner: w.handler}
		}
		h := &unseen{inner: inner, tracker: w.tracker, owner: w.owner, gvk: gvk}
		src := source.Kind[client.Object](w.cache, obj, h, changesOnly())
		if err := w.controller.Watch(src); err != nil {
			w.mu.Unlock()
			return fmt.Errorf("watching %s objects of the release: %w", gvk.Kind, err)
		}
		w.watched[gvk] = true
		w.tracker.markWatched(gvk)
		started = append(started, syncer{gvk: gvk, src: src})
	}
	w.mu.Unlock()
	w.waitSynced(started)
	return nil
}

// SyncWait bounds how long Ensure waits for a new watch to list its kind.
var SyncWait = 10 * time.Second

// syncer is a watch Ensure started.
type syncer struct {
	gvk schema.GroupVersionKind
	src source.SyncingSource
}

// waitSynced waits, at most SyncWait in all, for the watches started to
// have listed their kinds. A source's WaitForSync is given a context that is
// never cancelled: cancelling it would cancel the watch's start.
func (w *Watcher) waitSynced(started []syncer) {
	if len(started) == 0 {
		return
	}
	deadline := time.After(SyncWait)
	for _, s := range started {
		done := make(chan error, 1)
		go func() { done <- s.src.WaitForSync(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				w.log.Info("the watch of a kind of the release failed to sync", "kind", s.gvk.String(), "error", err.Error())
			}
		case <-deadline:
			w.log.Info("the watch of a kind of the release has not listed it yet; going on without waiting", "kind", s.gvk.String(), "waited", SyncWait.String())
			return
		}
	}
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

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// unseen passes an object's creation or update to its owner only when no
// reconcile has read that version yet, and holds it while the owner is being
// reconciled (see Tracker). Deletions always pass.
type unseen struct {
	inner   handler.EventHandler
	tracker *Tracker
	owner   schema.GroupKind
	gvk     schema.GroupVersionKind
}

func (h *unseen) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if h.tracker.known(h.gvk, e.Object) {
		return
	}
	h.inner.Create(ctx, e, h.gated(q, e.Object))
}

func (h *unseen) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	if h.tracker.known(h.gvk, e.ObjectNew) {
		return
	}
	h.inner.Update(ctx, e, h.gated(q, e.ObjectNew))
}

func (h *unseen) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.tracker.forget(h.gvk, e.Object)
	h.inner.Delete(ctx, e, q)
}

func (h *unseen) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	h.inner.Generic(ctx, e, q)
}

func (h *unseen) gated(q queue, obj client.Object) queue {
	return gatedQueue{queue: q, h: h, obj: keyOf(h.gvk, obj), rv: obj.GetResourceVersion()}
}

// gatedQueue adds an owner's request to the controller's queue unless the
// owner is being reconciled, in which case the Tracker holds it.
type gatedQueue struct {
	queue
	h   *unseen
	obj objectKey
	rv  string
}

func (g gatedQueue) Add(req reconcile.Request) {
	if g.h.tracker.hold(g.h.owner, req, g.queue, g.obj, g.rv) {
		return
	}
	g.queue.Add(req)
}
