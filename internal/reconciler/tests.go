package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// test runs the chart's test hooks when the watch enables them and this
// reconcile deployed a revision by an install or an upgrade, or the
// annotation helmapp.io/test has a value not yet acted on; never on a
// reconcile that changed nothing. While they run (after progressDelay) the
// status says AwaitingTests. The outcome is recorded in out. A newer
// generation preempts a run waiting on a test hook (ActionSuperseded; the
// TestSuccess message says so) and runs next.
func (r *Reconciler) test(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out *status.Outcome,
	runner *release.Runner, result release.Result, redactor status.Redactor) {
	if !r.opts.Tests.Enable || !result.Observed || result.State.Deployed == nil {
		return
	}
	ann, err := release.ParseAnnotations(obj.GetAnnotations())
	if err != nil {
		return
	}
	requested := ann.Test != "" && ann.Test != prev.LastHandledTest
	deployed := result.Succeeded && (result.DeployedBy == status.ActionInstall || result.DeployedBy == status.ActionUpgrade)
	if !requested && !deployed {
		return
	}
	if requested {
		out.TestRequest = ann.Test
	}
	running := *out
	running.Test = &status.TestRun{Revision: result.State.Deployed.Version, StartedAt: out.Now,
		IgnoreFailures: r.opts.Tests.IgnoreFailures}
	announced := r.announce(ctx, obj, status.Compute(prev, running), progressDelay)
	run, failure, superseded := runner.Test(ctx, r.opts.Tests.Timeout)
	announced()
	run.IgnoreFailures = r.opts.Tests.IgnoreFailures
	out.Test, out.TestFailure = &run, redactor.RedactMessage(failure)
	if superseded != nil {
		// Not a verdict on the chart: the newer generation runs next.
		r.supersededEvent(obj, superseded)
		return
	}
	r.testEvent(obj, run, out.TestFailure)
}

// Events of test runs.
const (
	// EventTestSucceeded: every test hook of the revision succeeded.
	EventTestSucceeded = "TestSucceeded"
	// EventTestFailed (Warning): a test hook failed; the note names it.
	EventTestFailed = "TestFailed"
)

// testEvent emits the event of a test run.
func (r *Reconciler) testEvent(obj *unstructured.Unstructured, run status.TestRun, failure string) {
	if failure != "" {
		r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventTestFailed, "test", "%s", status.Bound(failure, maxEventNote))
		return
	}
	r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventTestSucceeded, "test",
		"The %d test hooks of revision %d succeeded", len(run.Hooks), run.Revision)
}
