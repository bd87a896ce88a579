package reconciler

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// versions remembers the resourceVersion of each resource as this reconciler
// last left it (after its own status and finalizer writes), so that a read
// from the cache can tell whether the cache has caught up with those writes.
type versions struct {
	mu sync.Mutex
	rv map[types.NamespacedName]string
}

func (v *versions) get(k types.NamespacedName) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rv[k]
}

func (v *versions) set(k types.NamespacedName, rv string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rv == nil {
		v.rv = map[types.NamespacedName]string{}
	}
	if rv == "" {
		delete(v.rv, k)
		return
	}
	v.rv[k] = rv
}

// fetch reads the resource key into obj: from the cache of the watched kind
// (Options.Cache) when that cache holds the version this reconciler last
// wrote or a newer one and no failure is being retried, else from the API
// server. A reconcile that starts just
// after this reconciler's own status write thus never computes the next
// status from the one before it; every other reconcile (a change to the
// resource, to one of its objects, a periodic one) costs no request.
func (r *Reconciler) fetch(ctx context.Context, key types.NamespacedName, obj *unstructured.Unstructured) error {
	if r.svc.Cache != nil {
		err := r.svc.Cache.Get(ctx, key, obj)
		if err == nil && atLeast(obj.GetResourceVersion(), r.versions.get(key)) && !retrying(obj) {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		// Behind this reconciler's own write, gone from the cache (which may
		// lag behind a re-creation), or about to retry a failure: ask the API
		// server.
	}
	if err := r.svc.Client.Get(ctx, key, obj); err != nil {
		return err
	}
	return r.inShard(obj)
}

// atLeast tells whether resourceVersion rv is want or newer; an empty want
// (nothing written) is always met, and versions that do not compare are not.
func atLeast(rv, want string) bool {
	if want == "" || rv == want {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(rv, want)
	return err == nil && c > 0
}

// retrying tells whether obj's status counts failures, so that this
// reconcile may retry a failed action: it reads the newest spec, so that a
// spec changed just now is what is retried, rather than a stale one that
// would add a failed revision to Helm's history for nothing.
func retrying(obj *unstructured.Unstructured) bool {
	n, _, _ := unstructured.NestedInt64(obj.Object, "status", "failures")
	return n > 0
}
