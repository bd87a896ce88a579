package reconciler

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// inShard returns a NotFound error for a resource read from the API server
// that the operator's shard selector no longer selects: relabelled out of
// this shard, it is not this instance's any more, and is handled as gone
// from here (its release and finalizer stay, for the shard it moved to).
func (r *Reconciler) inShard(obj *unstructured.Unstructured) error {
	if r.svc.Shard == nil || r.svc.Shard.Matches(labels.Set(obj.GetLabels())) {
		return nil
	}
	gvk := obj.GroupVersionKind()
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, obj.GetName())
}

// shard is obj's values of the shard label keys (release.Shard).
func (r *Reconciler) shard(obj *unstructured.Unstructured) release.Shard {
	if len(r.svc.ShardKeys) == 0 {
		return release.Shard{}
	}
	s := release.Shard{Keys: r.svc.ShardKeys, Labels: map[string]string{}}
	l := obj.GetLabels()
	for _, k := range r.svc.ShardKeys {
		if v, ok := l[k]; ok {
			s.Labels[k] = v
		}
	}
	return s
}

// leaving forgets what the reconciler holds about a resource that left its
// cache: deleted, or relabelled out of the operator's shard. The reconcile
// that follows finds it gone and forgets its metrics; nothing is uninstalled
// and no finalizer is touched, since the resource may live on in another
// shard, whose instance adopts it.
func (r *Reconciler) leaving() predicate.Predicate {
	return predicate.Funcs{
		DeleteFunc: func(e event.DeleteEvent) bool {
			if e.Object != nil {
				r.gate.forget(e.Object.GetUID())
				r.foreign.forget(e.Object.GetUID())
				r.svc.Memo.Forget(e.Object.GetNamespace(), e.Object.GetName())
			}
			return true
		},
	}
}
