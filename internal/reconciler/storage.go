package reconciler

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// Helm's Secret storage labels each release record owner=helm,
// name=<release> and version=<revision>, and the chunked storage its index
// Secrets the same with its own owner; ReleaseRecordSelector selects those
// records (release.RecordSelector), and the operator's cache holds only
// their metadata, never their data (see internal/operator).
var ReleaseRecordSelector = release.RecordSelector

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

// releaseRecordGone maps a deleted release record to the resource of the
// release's name when the deletion matters to it:
//   - the resource waits for the release name (ReleaseNameConflict): the name may be free now;
//   - the record is of the revision the status calls deployed, or a later
//     one: Helm's storage was changed behind the operator's back (someone
//     deleted the release's Secrets), and the status must not keep saying
//     the revision is deployed.
//
// The records the resource's own upgrades prune (older revisions) and those
// its uninstall deletes (the resource is going) wake nobody.
func (r *Reconciler) releaseRecordGone(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, rec client.Object) []reconcile.Request {
		l := rec.GetLabels()
		key := types.NamespacedName{Namespace: rec.GetNamespace(), Name: l["name"]}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.opts.GVK)
		if key.Name == "" || c.Get(ctx, key, u) != nil || !u.GetDeletionTimestamp().IsZero() {
			return nil
		}
		s := status.FromObject(u)
		if st := meta.FindStatusCondition(s.Conditions, status.TypeStalled); st != nil &&
			st.Status == metav1.ConditionTrue && st.Reason == status.ReasonReleaseNameConflict {
			return []reconcile.Request{{NamespacedName: key}}
		}
		version, err := strconv.Atoi(l["version"])
		if err != nil || s.DeployedRelease == nil || version < s.DeployedRelease.Revision {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
}
