package reconciler

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ensureFinalizer puts Finalizer on obj, so that its release is uninstalled
// before it goes away.
func (r *Reconciler) ensureFinalizer(ctx context.Context, obj *unstructured.Unstructured) error {
	return r.patchFinalizers(ctx, obj, func(o *unstructured.Unstructured) bool { return controllerutil.AddFinalizer(o, Finalizer) })
}

// maxFinalizerAttempts bounds the conflicts one finalizer change retries.
const maxFinalizerAttempts = 5

// patchFinalizers applies change (which reports whether it changed
// anything) to obj's finalizers and patches them with an optimistic lock:
// a merge patch replaces the whole list, so without the lock a finalizer
// another controller added in between would be dropped. On a conflict it
// re-reads the resource from the API server and tries again. On success obj
// holds what the server stored; on failure it is as it was.
func (r *Reconciler) patchFinalizers(ctx context.Context, obj *unstructured.Unstructured, change func(*unstructured.Unstructured) bool) error {
	cur := obj.DeepCopy()
	for attempt := 1; ; attempt++ {
		base := cur.DeepCopy()
		if !change(cur) {
			obj.Object = cur.Object
			return nil
		}
		err := r.svc.Client.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			obj.Object = cur.Object
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == maxFinalizerAttempts {
			return err
		}
		// The cache may still hold the stale object: read the server's.
		cur = &unstructured.Unstructured{}
		cur.SetGroupVersionKind(obj.GroupVersionKind())
		if err := r.svc.Reader.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return err
		}
	}
}
