package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// AnnotationUninstallOnDelete, set to "false", lets a deleted resource go
// without uninstalling its release: its history and its objects stay.
const AnnotationUninstallOnDelete = release.AnnotationUninstallOnDelete

// deletionPoll is how often a deletion waiting for the release's objects to
// go (uninstallWait) looks again; their deletion also wakes it, through the
// dependent watches.
const deletionPoll = 5 * time.Second

// maxLingeringNames bounds the objects the waiting message names.
const maxLingeringNames = 5

// delete uninstalls obj's release, writes the status that says so (for
// whoever watches the resource go), and then removes the finalizer. It reports
// gone=true when the finalizer was removed, after which the resource may no
// longer exist and no further status is written. On failure the finalizer
// stays and the failure is recorded in out.
//
// With AnnotationUninstallOnDelete "false" the release is kept instead (see
// keep). With UninstallWait the finalizer stays until the release's objects
// are gone, and out.DeletionPending names those still there.
//
// prev is updated to the uninstalled status once written, so that a failure
// after the uninstall (removing the finalizer) keeps its outcome.
func (r *Reconciler) delete(ctx context.Context, obj *unstructured.Unstructured, prev *status.Status, out *status.Outcome) (gone bool, err error) {
	out.Deleting = true
	out.Initialized = true
	ann, err := release.ParseAnnotations(obj.GetAnnotations())
	if err != nil {
		return false, err
	}
	runner, err := r.runner(ctx, obj, *prev)
	if release.IsIdentityRefused(err) {
		return r.deleteUnnamed(ctx, obj, runner, err)
	}
	var plan release.DeletePlan
	var note string
	if err == nil {
		plan, note, err = runner.DecideDeletion(ctx, r.svc.Reader, !ann.UninstallOnDelete, status.Uninstalled(*prev))
	}
	switch {
	case err != nil:
	case plan == release.DeleteNotOurs:
		// Deleting a resource never uninstalls a release that is not its own.
		r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventUninstallSkipped, "Delete", "%s", note)
		return r.removeFinalizer(ctx, obj, "Nothing was uninstalled")
	case plan == release.DeleteKeep:
		return r.keep(ctx, obj, runner)
	case plan == release.DeleteSkip:
		// The ServiceAccount to uninstall as is gone with its namespace. The
		// API server may refuse the event in a namespace being deleted; the
		// log keeps it.
		r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventUninstallSkipped, "Delete", "%s", note)
		ctrl.LoggerFrom(ctx).Info(note, "event", EventUninstallSkipped)
		return r.removeFinalizer(ctx, obj, "Nothing was uninstalled")
	case plan == release.DeleteGone:
		// An earlier pass uninstalled the release and only the finalizer
		// failed: no second success to announce.
		out.Action, out.ActionSucceeded = status.ActionUninstall, true
		out.DeployedKnown, out.Deployed, out.Uninstalled = true, nil, true
		return r.removeFinalizer(ctx, obj, "The release was uninstalled")
	}
	if err == nil {
		out.Action = status.ActionUninstall
		r.uninstallProgress(ctx, obj, *prev, runner.Name)
		if r.kind.UninstallWait {
			err = r.uninstallAndWait(ctx, obj, runner, out)
		} else {
			err = runner.Uninstall(false)
		}
		if err == nil && runner.FoundNoRecords() {
			err = r.sweepLeftovers(ctx, obj, runner, status.RevisionStored(*prev))
		}
	}
	if err != nil {
		// A failed uninstall may have removed part of the release and marked
		// it uninstalling: read back what Helm stored rather than keep
		// claiming the old revision is deployed.
		// A record rewritten in place is never described as deployed.
		if runner != nil && !release.IsStalledBy(err, status.ReasonReleaseRecordInvalid) {
			if st, obsErr := release.Observe(runner.Client, runner.Name); obsErr == nil {
				out.DeployedKnown, out.Deployed = true, release.Describe(st.Deployed, runner.DigestKey)
			}
		}
		return false, err
	}
	out.DeployedKnown, out.Deployed, out.Uninstalled, out.ActionSucceeded = true, nil, true, true
	if out.DeletionPending != "" {
		return false, nil
	}
	r.successEvent(obj, *out)
	// Say so before the resource goes away, for whoever watches it.
	next := status.Compute(*prev, *out)
	if err := r.status.Write(ctx, obj, next); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Writing the uninstalled status failed; removing the finalizer anyway")
	}
	*prev = next
	return r.removeFinalizer(ctx, obj, "The release was uninstalled")
}

// sweepLeftovers deletes what the release left outside the resource's
// namespace when Helm found no record of it to uninstall (its namespace's
// deletion took the records first): the objects of the kinds and names the
// watch's scope allows that the operator marked as the resource's
// (release.Leftovers). Without a scope there is nothing to look for.
//
// stored says whether the status ever named a revision Helm stored. When it
// did not (an install refused before Helm wrote anything, e.g. for a
// permission the identity lacks), nothing of the release can be left, and a
// sweep that fails — typically for the same missing permission, to list a
// scope's kind — must not hold the finalizer: it is logged and the deletion
// goes on.
func (r *Reconciler) sweepLeftovers(ctx context.Context, obj *unstructured.Unstructured, runner *release.Runner, stored bool) error {
	if len(runner.Scope.ClusterScoped) == 0 && len(runner.Scope.Namespaced) == 0 {
		return nil
	}
	// The release's identity looks and deletes: an impersonated one through
	// its own uncached client; the operator lists through its live reader,
	// as its client would start an informer for the kind.
	var reader client.Reader = r.svc.Reader
	writer := runner.Writer
	if writer != nil {
		reader = writer
	} else {
		writer = r.svc.Client
	}
	owner := obj.GroupVersionKind().GroupKind()
	deleted, err := release.Leftovers{Reader: reader, Mapper: r.svc.RESTMapper, Objects: writer, Selector: dependents.Selector()}.
		Sweep(ctx, runner.Scope, owner, obj.GetNamespace(), obj.GetName())
	if len(deleted) > 0 {
		ctrl.LoggerFrom(ctx).Info("Release "+runner.Name+" had no record left to uninstall; deleted the objects it left outside namespace "+obj.GetNamespace(),
			"objects", deleted)
	}
	if err != nil && !stored {
		ctrl.LoggerFrom(ctx).Info("Release "+runner.Name+" never stored a revision; looking for objects it left outside namespace "+obj.GetNamespace()+" failed, and the deletion goes on",
			"error", err.Error())
		return nil
	}
	if err != nil {
		return &release.Error{Reason: status.ReasonUninstallError, Action: status.ActionUninstall,
			Summary: fmt.Sprintf("Uninstall of release %s failed: it had no record left, and deleting what it left outside namespace %s failed", runner.Name, obj.GetNamespace()),
			Err:     err}
	}
	return nil
}

// deleteUnnamed lets a resource that names no ServiceAccount, while one is
// required (or names one while ServiceAccounts are off), go when no release
// of it is stored: nothing is to be uninstalled. Otherwise stalled is the failure, and the finalizer stays
// until the resource names a ServiceAccount to uninstall as (or keeps its
// release with helmapp.io/uninstall-on-delete: "false").
func (r *Reconciler) deleteUnnamed(ctx context.Context, obj *unstructured.Unstructured, runner *release.Runner, stalled error) (bool, error) {
	if ann, _ := release.ParseAnnotations(obj.GetAnnotations()); !ann.UninstallOnDelete {
		return r.keep(ctx, obj, runner)
	}
	st, err := release.Observe(runner.Client, runner.Name)
	if err != nil {
		return false, err
	}
	if st.Latest != nil {
		return false, stalled
	}
	return r.removeFinalizer(ctx, obj, "Nothing was uninstalled")
}

// uninstallProgress says that the uninstall of release name is under way
// (Reconciling=True Progressing) before it starts, unless the deletion
// already waits for the release's objects to go (uninstallWait), which its
// own Reconciling=True Deleting says. A failed write is not fatal.
func (r *Reconciler) uninstallProgress(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, name string) {
	if c := meta.FindStatusCondition(prev.Conditions, status.TypeReconciling); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == status.ReasonDeleting {
		return
	}
	msg := fmt.Sprintf("Uninstalling release %s", name)
	if err := r.status.Write(ctx, obj, status.Progressing(prev, obj.GetGeneration(), msg)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Writing the progress status failed")
	}
}

// removeFinalizer lets the resource go; done says what was done before, for
// the message of a failure.
func (r *Reconciler) removeFinalizer(ctx context.Context, obj *unstructured.Unstructured, done string) (bool, error) {
	err := r.patchFinalizers(ctx, obj, func(o *unstructured.Unstructured) bool { return controllerutil.RemoveFinalizer(o, Finalizer) })
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, &release.Error{Reason: status.ReasonErrorRemovingFinalizer,
			Summary: fmt.Sprintf("%s but removing the finalizer %s failed", done, Finalizer), Err: err}
	}
	return true, nil
}

// uninstallAndWait uninstalls the release keeping its last revision, marked
// uninstalled, whose manifest names the objects to wait for; once none of
// them is left it purges the history. While some remain, it names them in
// out.DeletionPending.
func (r *Reconciler) uninstallAndWait(ctx context.Context, obj *unstructured.Unstructured, runner *release.Runner, out *status.Outcome) error {
	if err := runner.Uninstall(true); err != nil {
		return err
	}
	st, err := release.Observe(runner.Client, runner.Name)
	if err != nil || st.Latest == nil {
		return err
	}
	left, err := release.Lingering(ctx, r.svc.Reader, r.svc.RESTMapper, st.Latest, obj.GetNamespace())
	if err != nil {
		return err
	}
	if len(left) > 0 {
		names := strings.Join(left[:min(len(left), maxLingeringNames)], ", ")
		if more := len(left) - maxLingeringNames; more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		out.DeletionPending = fmt.Sprintf("Waiting for %d objects of release %s to be deleted: %s", len(left), runner.Name, names)
		return nil
	}
	return runner.Uninstall(false)
}

// keep lets the resource go without uninstalling its release. The
// resource's owner references come off the release's objects and Helm's
// release Secrets first: helm-operator-plugins' client puts one on each, and
// the garbage collector would otherwise delete them once the resource is gone.
func (r *Reconciler) keep(ctx context.Context, obj *unstructured.Unstructured, runner *release.Runner) (bool, error) {
	st, err := release.Observe(runner.Client, runner.Name)
	if err != nil {
		return false, err
	}
	if err := runner.RecordsInScope(st); err != nil {
		return false, release.HeldDeletion(err, "the release's objects are not released from the resource's ownership")
	}
	writer := runner.Writer
	if runner.Identity.Impersonated() {
		// A ServiceAccount that is gone writes nothing: the operator then
		// tries as itself, and says so if it may not.
		if sa, err := release.LookUpServiceAccount(ctx, r.svc.Reader, runner.Identity); err == nil && sa.Missing {
			writer = nil
		}
	}
	if writer == nil {
		writer = r.svc.Client
	}
	n, err := release.Disowner{Reader: r.svc.Reader, Mapper: r.svc.RESTMapper, Objects: writer, Storage: r.svc.Client}.
		Disown(ctx, st, obj.GetNamespace(), obj.GetName(), obj.GetUID())
	if err != nil {
		return false, &release.Error{Reason: status.ReasonReconcileError,
			Summary: fmt.Sprintf("Keeping release %s: taking the resource's owner references off its objects failed", runner.Name), Err: err}
	}
	note := fmt.Sprintf("Release %s was not uninstalled (%s: \"false\"); there is no release to keep", runner.Name, AnnotationUninstallOnDelete)
	if st.Latest != nil {
		note = fmt.Sprintf("Release %s was kept (%s: \"false\"): its history and its objects stay, %d of them released from the resource's ownership",
			runner.Name, AnnotationUninstallOnDelete, n)
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventReleaseKept, "Delete", "%s", note)
	return r.removeFinalizer(ctx, obj, "The release was kept")
}
