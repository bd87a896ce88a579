package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// Helm's Secret storage labels each release record owner=helm,
// name=<release>, status=<status> and version=<revision>, and the chunked
// storage its index Secrets the same with its own owner;
// ReleaseRecordSelector selects those records (release.RecordSelector), and
// the operator's cache holds only their metadata, never their data (see
// internal/operator).
var ReleaseRecordSelector = release.RecordSelector

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// storageEvents handles the changes to Helm's release records, seen through
// c (the metadata-only cache of those records), for the resources of the
// reconciler's kind:
//
//   - a change someone else wrote — the helm CLI, a person deleting Secrets,
//     another process: a record created (a new revision, a new lock),
//     updated (a revision leaving pending, a rollback's superseding) or
//     deleted (an uninstall) — reconciles the resource of the release's name
//     at once, even while it backs off or waits for a lock (see
//     foreignWrite): the status must say what Helm holds now, and a
//     revision written by someone else is undone (see release.Foreign);
//   - a deletion this process made wakes only a resource that waits for the
//     release name to free up (ReleaseNameConflict): the release of another
//     resource, whose uninstall frees the name;
//   - the writes this process made otherwise (its installs, upgrades,
//     history pruning, unlocks, adoptions; see release.Writes), the records
//     listed when the watch starts and the informer's resyncs wake nobody.
//
// A resource being deleted is woken by nothing here — its own uninstall
// deletes the records — unless its deletion is held by a record it may not
// act on: out of the release's scope (Stalled OutOfScope) or rewritten in
// place (ReleaseRecordInvalid), which someone must remove or restore.
func (r *Reconciler) storageEvents(c client.Reader) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			if !e.IsInInitialList {
				r.recordChanged(ctx, c, e.Object, false, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				r.recordChanged(ctx, c, e.ObjectNew, false, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			r.recordChanged(ctx, c, e.Object, true, q)
		},
	}
}

// recordChanged wakes the resource of rec's release, if any, as
// storageEvents says.
func (r *Reconciler) recordChanged(ctx context.Context, c client.Reader, rec client.Object, deleted bool, q queue) {
	l := rec.GetLabels()
	if !ReleaseRecordSelector.Matches(labels.Set(l)) || l["name"] == "" {
		return
	}
	st := l["status"]
	if deleted {
		st = ""
	}
	own := r.svc.Writes.Own(rec.GetNamespace(), rec.GetName(), rec.GetResourceVersion(), st)
	if own && !deleted {
		return
	}
	key := types.NamespacedName{Namespace: rec.GetNamespace(), Name: l["name"]}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.kind.GVK)
	if c.Get(ctx, key, u) != nil || (!u.GetDeletionTimestamp().IsZero() && !heldByRecord(u)) {
		return
	}
	if own {
		s := status.FromObject(u)
		if st := meta.FindStatusCondition(s.Conditions, status.TypeStalled); st == nil ||
			st.Status != metav1.ConditionTrue || st.Reason != status.ReasonReleaseNameConflict {
			return
		}
	} else {
		r.gate.foreignWrite(u.GetUID())
	}
	q.Add(reconcile.Request{NamespacedName: key})
}

// heldByRecord tells whether u's status says it is held by a record of its
// release it may not act on (Stalled=True OutOfScope or
// ReleaseRecordInvalid): a change to the records may end that.
func heldByRecord(u *unstructured.Unstructured) bool {
	c := meta.FindStatusCondition(status.FromObject(u).Conditions, status.TypeStalled)
	return c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == status.ReasonOutOfScope || c.Reason == status.ReasonReleaseRecordInvalid)
}
