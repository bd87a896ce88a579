package reconciler

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// The finalizer goes only where the garbage collector cannot do the
// uninstall's job (release.NeedsFinalizer, which states the rule): this
// reconciler acts on the rule and judges nothing itself. What the resource
// and its watch say (finalizer: always, uninstall-on-delete "false",
// uninstallWait) is acted on before the pass (initialize); what its release
// holds, by the pass: the finalizer is added before Helm writes anything
// that needs it (Runner.Finalize) and taken off once what Helm stores no
// longer does (Runner.Unfinalize), so that a resource of an earlier version,
// which has it whatever its release, loses it on its next pass when safe.
// A resource being deleted with the finalizer takes the uninstall path
// (delete.go); one without it goes at once, its release with it.

// initialize puts Finalizer on obj when the resource or its watch needs it
// whatever its release holds (a paused one too, before it is held back);
// otherwise the pass decides (finalizeHooks).
// Then out says why (a held resource's status keeps its conditions: a
// paused one says so in Paused).
func (r *Reconciler) initialize(ctx context.Context, obj *unstructured.Unstructured, ann release.Annotations, out *status.Outcome) error {
	r.finalizers.seen(obj)
	need, why := r.ownNeed(ann)
	if !need {
		return nil
	}
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return addingFailed(err)
	}
	r.finalizers.keep(obj, why, "")
	out.Initialized, out.FinalizerWhy = true, why
	return nil
}

// holdDeletion puts Finalizer on obj, whose annotations cannot be read: one
// of them may have meant to keep the release (uninstall-on-delete "false"),
// so a deletion waits until they are fixed. A failure is logged: the
// annotations' is the one the status names.
func (r *Reconciler) holdDeletion(ctx context.Context, obj *unstructured.Unstructured) {
	if !obj.GetDeletionTimestamp().IsZero() {
		return
	}
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Adding the finalizer, which holds a deletion while the annotations are invalid, failed")
	}
}

// ownNeed is release.NeedsFinalizer of what the resource and its watch say.
func (r *Reconciler) ownNeed(ann release.Annotations) (bool, string) {
	return release.NeedsFinalizer(release.FinalizerFacts{Policy: r.kind.Finalizer, Keep: !ann.UninstallOnDelete,
		UninstallWait: r.kind.UninstallWait, Paused: ann.Paused})
}

// finalizeHooks lets the pass of runner add the finalizer to obj before it
// writes what needs it, or take it off once nothing does.
func (r *Reconciler) finalizeHooks(ctx context.Context, obj *unstructured.Unstructured, runner *release.Runner) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		runner.Finalize = func(why string) error {
			if err := r.patchOwnFinalizers(ctx, obj, func(o *unstructured.Unstructured) bool { return controllerutil.AddFinalizer(o, Finalizer) }); err != nil {
				return addingFailed(err)
			}
			r.finalizers.keep(obj, why, "")
			return nil
		}
		return
	}
	if ann, err := release.ParseAnnotations(obj.GetAnnotations()); err != nil {
		return
	} else if need, _ := r.ownNeed(ann); need {
		return
	}
	runner.KeptAt = r.finalizers.at(obj)
	runner.Unfinalize = func() error {
		err := r.patchOwnFinalizers(ctx, obj, func(o *unstructured.Unstructured) bool { return controllerutil.RemoveFinalizer(o, Finalizer) })
		if err != nil && !apierrors.IsNotFound(err) {
			// Taken off on a later pass; the release is as it should be.
			ctrl.LoggerFrom(ctx).Error(err, "Removing the finalizer, which the release no longer needs, failed")
			return err
		}
		r.finalizers.keep(obj, "", "")
		return nil
	}
}

// noteFinalizer records in out how the resource's release goes with it,
// from what the pass found (p.Finalizer) and what obj carries now.
func (r *Reconciler) noteFinalizer(obj *unstructured.Unstructured, p *release.Pass, out *status.Outcome) {
	if v := p.Finalizer; v != nil && v.Needed {
		r.finalizers.keep(obj, v.Why, v.At)
	}
	out.Collected = !controllerutil.ContainsFinalizer(obj, Finalizer)
	if !out.Collected {
		out.FinalizerWhy = r.finalizers.why(obj)
	}
}

// forgetGone forgets the resource req, which is gone: what the reconciler
// kept of it by name, and, when it went without a finalizer (the garbage
// collector's), by the UID it had.
func (r *Reconciler) forgetGone(req ctrl.Request) {
	r.versions.set(req.NamespacedName, "")
	r.svc.Memo.Forget(req.Namespace, req.Name)
	if uid := r.finalizers.forget(req.NamespacedName); uid != "" {
		r.gate.forget(uid)
		r.foreign.forget(uid)
		r.svc.Warnings.Forget(uid)
	}
}

// patchOwnFinalizers changes obj's finalizers during a pass: on a copy, so
// that the pass goes on with the resource it read, taking back only the
// finalizers and, when the spec is the one it read, the resourceVersion
// (the status write's optimistic lock).
func (r *Reconciler) patchOwnFinalizers(ctx context.Context, obj *unstructured.Unstructured, change func(*unstructured.Unstructured) bool) error {
	cp := obj.DeepCopy()
	if err := r.patchFinalizers(ctx, cp, change); err != nil {
		return err
	}
	obj.SetFinalizers(cp.GetFinalizers())
	if cp.GetGeneration() == obj.GetGeneration() {
		obj.SetResourceVersion(cp.GetResourceVersion())
	}
	return nil
}

func addingFailed(err error) error {
	return &release.Error{Reason: status.ReasonErrorAddingFinalizer,
		Summary: fmt.Sprintf("Adding the finalizer %s failed", Finalizer), Err: err}
}

// finalizerMemo remembers, per resource, its UID (so that a resource gone
// without a finalizer is forgotten by name, forget) and, while it keeps the
// finalizer, why and where its pass last found it needed.
type finalizerMemo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]finalizerNote
}

type finalizerNote struct {
	uid     types.UID
	why, at string
}

func (f *finalizerMemo) note(obj client.Object) (finalizerNote, bool) {
	n, ok := f.m[client.ObjectKeyFromObject(obj)]
	return n, ok && n.uid == obj.GetUID()
}

// seen records obj's UID under its name.
func (f *finalizerMemo) seen(obj client.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.note(obj); ok {
		return
	}
	if f.m == nil {
		f.m = map[types.NamespacedName]finalizerNote{}
	}
	f.m[client.ObjectKeyFromObject(obj)] = finalizerNote{uid: obj.GetUID()}
}

// keep records why obj keeps the finalizer, found at at ("" for nothing).
func (f *finalizerMemo) keep(obj client.Object, why, at string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.NamespacedName]finalizerNote{}
	}
	f.m[client.ObjectKeyFromObject(obj)] = finalizerNote{uid: obj.GetUID(), why: why, at: at}
}

func (f *finalizerMemo) why(obj client.Object) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _ := f.note(obj)
	return n.why
}

func (f *finalizerMemo) at(obj client.Object) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, _ := f.note(obj)
	return n.at
}

// forget forgets the resource key and returns the UID it had, "" when
// none was recorded.
func (f *finalizerMemo) forget(key types.NamespacedName) types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.m[key]
	delete(f.m, key)
	return n.uid
}

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
