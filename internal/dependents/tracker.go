package dependents

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Tracker remembers, for each object of the releases, the newest version
// (resourceVersion) a reconcile has read of it, and which resources are being
// reconciled right now. With it the operator is not woken by what it has
// already seen:
//
//   - an event for a version a reconcile has read (or older) starts no
//     reconcile: the status already reflects it. The objects an install
//     creates are read for their readiness in the same reconcile, so their
//     creation events start nothing more;
//   - an event that arrives while its owner is being reconciled is held until
//     that reconcile ends, and then starts another one only if the reconcile
//     did not read that version. Without this, every install would be followed
//     by a second, full reconcile, woken by the creations it made itself;
//   - a read from the cache that is older than a version already read is not
//     used (see Reader): the status never goes back in time.
//
// One Tracker is shared by every kind's controller; it holds one entry per
// object read, and forgets an object when it is deleted.
type Tracker struct {
	mu sync.Mutex
	// seen is the newest resourceVersion read of each object.
	seen map[objectKey]string
	// watched are the kinds whose labelled objects the cache holds.
	watched map[schema.GroupVersionKind]bool
	// busy are the resources being reconciled, with the events held for them.
	busy map[ownerKey]*held
	// created are objects as the API server returned them from this
	// process' creates, until a read takes them (see Created).
	created map[objectKey]createdObject
}

type createdObject struct {
	u  *unstructured.Unstructured
	at time.Time
}

// createdTTL bounds how long a created object is kept for a read: the read
// it saves follows its create within the same reconcile.
const createdTTL = time.Minute

type objectKey struct {
	gvk schema.GroupVersionKind
	key types.NamespacedName
}

type ownerKey struct {
	gk  schema.GroupKind
	key types.NamespacedName
}

// held is what arrived for a resource while it was being reconciled.
type held struct {
	queue  workqueue.TypedRateLimitingInterface[reconcile.Request]
	events []heldEvent
}

type heldEvent struct {
	obj objectKey
	rv  string
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{seen: map[objectKey]string{}, watched: map[schema.GroupVersionKind]bool{}, busy: map[ownerKey]*held{}, created: map[objectKey]createdObject{}}
}

func keyOf(gvk schema.GroupVersionKind, obj client.Object) objectKey {
	return objectKey{gvk: gvk, key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

// newer tells whether resourceVersion a is newer than b; an empty b is older
// than anything, and versions that do not compare (not numbers, which the API
// server does not promise) count as newer, so that nothing is skipped on them.
func newer(a, b string) bool {
	switch {
	case a == b:
		return false
	case b == "":
		return true
	}
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || c > 0
}

// Saw records that a reconcile read version rv of the object.
func (t *Tracker) Saw(gvk schema.GroupVersionKind, obj client.Object) {
	rv := obj.GetResourceVersion()
	if t == nil || rv == "" {
		return
	}
	k := keyOf(gvk, obj)
	t.mu.Lock()
	defer t.mu.Unlock()
	if newer(rv, t.seen[k]) {
		t.seen[k] = rv
	}
}

// stale tells whether version rv of the object is older than one a reconcile
// has read.
func (t *Tracker) stale(gvk schema.GroupVersionKind, obj client.Object) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := t.seen[keyOf(gvk, obj)]
	return seen != "" && newer(seen, obj.GetResourceVersion())
}

// known tells whether a reconcile has read this version of the object, or a
// newer one.
func (t *Tracker) known(gvk schema.GroupVersionKind, obj client.Object) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := t.seen[keyOf(gvk, obj)]
	return seen != "" && !newer(obj.GetResourceVersion(), seen)
}

// forget drops a deleted object.
func (t *Tracker) forget(gvk schema.GroupVersionKind, obj client.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, keyOf(gvk, obj))
	delete(t.created, keyOf(gvk, obj))
}

// Created keeps u, the object as the API server returned it from a create
// by this process, so that the next read of it (Reader.Get) is answered
// with it instead of a request: the readiness read right after an install.
// It is not a read: the object's creation event still counts as unseen
// until a read takes it. Call Uncreated when anything may have changed the
// object since (a hook ran, Helm waited).
func (t *Tracker) Created(u *unstructured.Unstructured) {
	if t == nil || u == nil || u.GetResourceVersion() == "" || u.GetUID() == "" {
		return
	}
	now := time.Now()
	k := keyOf(u.GroupVersionKind(), u)
	t.mu.Lock()
	defer t.mu.Unlock()
	for ck, c := range t.created {
		if now.Sub(c.at) > createdTTL {
			delete(t.created, ck)
		}
	}
	t.created[k] = createdObject{u: u.DeepCopy(), at: now}
}

// Uncreated drops what Created kept of u.
func (t *Tracker) Uncreated(u *unstructured.Unstructured) {
	if t == nil || u == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.created, keyOf(u.GroupVersionKind(), u))
}

// takeCreated drops what Created kept of the object key of kind gvk and,
// when that is newer than every version a reconcile has read, returns the
// newer of it and cached (the cache's copy, nil when the cache holds none);
// it returns nil otherwise.
func (t *Tracker) takeCreated(gvk schema.GroupVersionKind, key client.ObjectKey, cached *unstructured.Unstructured) *unstructured.Unstructured {
	if t == nil {
		return nil
	}
	k := objectKey{gvk: gvk, key: key}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.created[k]
	if !ok {
		return nil
	}
	delete(t.created, k)
	rv := c.u.GetResourceVersion()
	switch {
	case time.Since(c.at) > createdTTL:
		return nil
	case t.seen[k] != "" && newer(t.seen[k], rv):
		return nil
	case cached != nil && cached.GetUID() == c.u.GetUID() && !newer(rv, cached.GetResourceVersion()):
		return cached // the cache has caught up
	}
	return c.u
}

func (t *Tracker) markWatched(gvk schema.GroupVersionKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watched[gvk] = true
}

func (t *Tracker) isWatched(gvk schema.GroupVersionKind) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watched[gvk]
}

// Begin marks the resource req of kind gk as being reconciled. Call End when
// the reconcile has read everything it judges.
func (t *Tracker) Begin(gk schema.GroupKind, req reconcile.Request) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy[ownerKey{gk, req.NamespacedName}] = &held{}
}

// End ends the reconcile Begin marked, and queues the resource again if an
// event held meanwhile carried a version of an object that the reconcile did
// not read.
func (t *Tracker) End(gk schema.GroupKind, req reconcile.Request) {
	if t == nil {
		return
	}
	k := ownerKey{gk, req.NamespacedName}
	t.mu.Lock()
	h := t.busy[k]
	delete(t.busy, k)
	again := false
	if h != nil {
		for _, e := range h.events {
			if newer(e.rv, t.seen[e.obj]) {
				again = true
				break
			}
		}
	}
	t.mu.Unlock()
	if again && h.queue != nil {
		h.queue.Add(req)
	}
}

// hold keeps an event for req when req is being reconciled, and reports
// whether it did.
func (t *Tracker) hold(gk schema.GroupKind, req reconcile.Request, q workqueue.TypedRateLimitingInterface[reconcile.Request], obj objectKey, rv string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.busy[ownerKey{gk, req.NamespacedName}]
	if !ok {
		return false
	}
	h.queue = q
	h.events = append(h.events, heldEvent{obj: obj, rv: rv})
	return true
}

// freshKey is the context key of ReadFresh.
type freshKey struct{}

// ReadFresh returns a context in which Reader reads from the API server, not
// from the cache: for the reads that follow the operator's own writes to the
// objects (an install, an upgrade, a restored drift), which the cache may not
// hold yet.
func ReadFresh(ctx context.Context) context.Context {
	return context.WithValue(ctx, freshKey{}, true)
}

func fresh(ctx context.Context) bool {
	v, _ := ctx.Value(freshKey{}).(bool)
	return v
}
