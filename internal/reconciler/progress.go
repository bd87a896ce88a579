package reconciler

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// progressDelay is how long a Helm action runs before the status says it is
// under way. Most installs and upgrades end sooner, and their outcome is then
// the only status written: one write per action, not two. A resource whose
// generation is ahead of its observedGeneration reads as in progress
// (kstatus) all the while.
const progressDelay = 2 * time.Second

// announce writes the progress status s (Reconciling=True with what is
// under way) if the action that follows is still running after delay
// (progressDelay, or 0 to write it at once). The returned function ends the announcement: it stops the
// timer or waits for a write in flight, and leaves obj as the server holds
// it. Until then obj must not be written: the write works on a copy, so that
// the action may read obj meanwhile. A failed write is not fatal: the
// reconcile's own write says the outcome either way.
func (r *Reconciler) announce(ctx context.Context, obj *unstructured.Unstructured, s status.Status, delay time.Duration) func() {
	cp := obj.DeepCopy()
	if delay <= 0 {
		if err := r.status.Write(ctx, cp, s); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Writing the progress status failed")
		} else {
			obj.Object = cp.Object
		}
		return func() {}
	}
	var (
		mu    sync.Mutex
		wrote bool
	)
	t := time.AfterFunc(delay, func() {
		mu.Lock()
		defer mu.Unlock()
		if err := r.status.Write(ctx, cp, s); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Writing the progress status failed")
			return
		}
		wrote = true
	})
	return func() {
		if t.Stop() {
			return // not written, and it never will be
		}
		mu.Lock()
		defer mu.Unlock()
		if wrote {
			obj.Object = cp.Object
		}
	}
}

// announcePlan announces msg, what the plan about to run does (nothing when
// the generation is stalled by its spec and no retry asks for an attempt):
// if the Helm call takes long, or at once when it undoes foreign, a revision
// someone else wrote, which the status names meanwhile beside deployed.
func (r *Reconciler) announcePlan(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out status.Outcome, msg string, deployed *status.DeployedRelease, foreign *release.Foreign) func() {
	if out.Retry == "" && status.StalledBySpec(prev, obj.GetGeneration()) {
		return func() {}
	}
	progress, delay := status.Progressing(prev, obj.GetGeneration(), msg), progressDelay
	if foreign != nil {
		progress, delay = undoing(progress, msg, foreign, deployed), 0
	}
	return r.announce(ctx, obj, progress, delay)
}
