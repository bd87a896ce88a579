package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// delete uninstalls obj's release, writes the status that says so (for
// whoever watches the resource go), and then removes the finalizer. It reports
// gone=true when the finalizer was removed, after which the resource may no
// longer exist and no further status is written. On failure the finalizer
// stays and the failure is recorded in out.
func (r *Reconciler) delete(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out *status.Outcome) (gone bool, err error) {
	out.Deleting = true
	out.Initialized = true
	runner, err := r.runner(ctx, obj)
	var notOurs string
	if err == nil {
		notOurs, err = runner.NotOurs()
	}
	if err == nil && notOurs != "" {
		// Deleting a resource never uninstalls a release that is not its own.
		r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventUninstallSkipped, "Delete", "%s", notOurs)
		return r.removeFinalizer(ctx, obj, "Nothing was uninstalled")
	}
	if err == nil {
		out.Action = status.ActionUninstall
		err = runner.Uninstall()
	}
	if err != nil {
		// A failed uninstall may have removed part of the release and marked
		// it uninstalling: read back what Helm stored rather than keep
		// claiming the old revision is deployed.
		if runner != nil {
			if st, obsErr := release.Observe(runner.Client, runner.Name); obsErr == nil {
				out.DeployedKnown, out.Deployed = true, release.Describe(st.Deployed)
			}
		}
		return false, err
	}
	out.DeployedKnown, out.Deployed, out.Uninstalled = true, nil, true
	r.successEvent(obj, *out)
	// Say so before the resource goes away, for whoever watches it.
	if err := r.status.Write(ctx, obj, status.Compute(prev, *out)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Writing the uninstalled status failed; removing the finalizer anyway")
	}

	return r.removeFinalizer(ctx, obj, "The release was uninstalled")
}

// removeFinalizer lets the resource go; done says what was done before, for
// the message of a failure.
func (r *Reconciler) removeFinalizer(ctx context.Context, obj *unstructured.Unstructured, done string) (gone bool, err error) {
	base := obj.DeepCopy()
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.opts.Client.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		obj.Object = base.Object
		return false, &release.Error{Reason: status.ReasonErrorRemovingFinalizer,
			Summary: fmt.Sprintf("%s but removing the finalizer %s failed", done, Finalizer), Err: err}
	}
	return true, nil
}
