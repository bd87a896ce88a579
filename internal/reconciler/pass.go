package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// pass makes the one pass over obj's release (release.Reconcile): the
// release package runs it, in its order; this reconciler takes part only
// where the user must see something while it runs (the progress status, the
// events of each step as it ends) and where the kind's rollout answers.
func (r *Reconciler) pass(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out *status.Outcome, redactor status.Redactor, values readValues) *release.Pass {
	req := release.PassRequest{
		NewRunner: func() (*release.Runner, error) {
			runner, err := r.runner(ctx, obj, prev)
			if runner != nil {
				r.finalizeHooks(ctx, obj, runner)
			}
			return runner, err
		},
		Object:         obj,
		OverrideValues: r.kind.OverrideValues, ValuesSources: values.sources, ValuesSourcesErr: values.err,
		Records: r.svc.Records, RecordIndex: RecordIndex, Memo: r.svc.Memo,
		Tests: r.kind.Tests, HandledTest: prev.LastHandledTest, Previous: prev,
		Hooks: release.PassHooks{
			Announce: func(msg string, deployed *status.DeployedRelease, foreign *release.Foreign) func() {
				return r.announcePlan(ctx, obj, prev, *out, msg, deployed, foreign)
			},
			AnnounceTest: func(p *release.Pass, run status.TestRun) func() {
				running := *out
				record(&running, p, redactor)
				run.StartedAt = out.Now
				running.Test = &run
				return r.announce(ctx, obj, status.Compute(prev, running), progressDelay)
			},
			Warnings: func() func() []readiness.Warning {
				// Warnings left by an earlier action were reported by it.
				r.svc.Warnings.Take(obj.GetUID())
				return func() []readiness.Warning { return r.svc.Warnings.Take(obj.GetUID()) }
			},
			Fresh: dependents.ReadFresh,
			Step: func(step release.Step, p *release.Pass) {
				r.stepEvents(obj, prev, *out, step, p, redactor)
			},
		},
	}
	if r.rollout != nil {
		req.Hooks.Admit = r.admitChartUpgrade(obj)
	}
	p := release.Reconcile(ctx, req)
	r.noteFinalizer(obj, p, out)
	return p
}

// record records in out what pass observed and did.
func record(out *status.Outcome, p *release.Pass, redactor status.Redactor) {
	if p.DeployedKnown {
		out.DeployedKnown, out.Deployed = true, p.Deployed
	}
	if p.Rollout != nil {
		out.Rollout = p.Rollout
	}
	if p.Ran {
		out.Action, out.DeployedBy, out.ActionSucceeded = p.Result.Action, p.Result.DeployedBy, p.Result.Succeeded
		out.History, out.Nondeterministic = p.History, p.Result.Nondeterministic
	}
	if p.Ran && p.Result.DriftChecked {
		out.DriftChecked, out.Drift = true, p.Result.Drift
		out.DriftWhy = "the watch's drift mode is warn"
		if p.RunErr != nil {
			out.DriftWhy = "the correction failed: see Irreconcilable"
		}
	}
	if p.TestRequest != "" {
		out.TestRequest = p.TestRequest
	}
	if p.Test != nil {
		out.Test, out.TestFailure = p.Test, redactor.Safe(p.TestFailure, status.MaxMessageLength)
	}
}

// outcome turns the pass into the reconcile's outcome (out) and when to
// reconcile again: it judges the readiness of the deployed revision's
// objects, and on a failure emits its event and returns its backoff (see
// failed). The events of the pass's steps were emitted as each ended
// (stepEvents).
func (r *Reconciler) outcome(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out *status.Outcome, p *release.Pass, redactor status.Redactor, inputs verdictInputs) ctrl.Result {
	record(out, p, redactor)
	if p.Wrote() {
		// This reconcile wrote the objects (or may have): judge what the
		// server holds now, which the cache may not hold yet.
		ctx = dependents.ReadFresh(ctx)
	}
	err := p.Err
	switch {
	case err == nil:
		err = r.judgeReadiness(ctx, obj, p.Result.State, out, redactor)
	case p.Ran && p.Result.Observed:
		// The deployed revision's objects still run and matter: their
		// readiness is judged on the failure paths too, so that the
		// verdict is never an old one passed off as current.
		if rerr := r.judgeReadiness(ctx, obj, p.Result.State, out, redactor); rerr != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Judging readiness after a failure failed", "error", rerr.Error())
		}
	}
	if err != nil {
		return r.failed(ctx, obj, prev, out, err, redactor, inputs)
	}
	r.gate.clear(obj.GetUID())
	return ctrl.Result{RequeueAfter: r.requeueAfter(prev, *out)}
}
