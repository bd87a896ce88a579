package release

import (
	"context"
	"errors"
	"time"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// deployment is what an install and an upgrade differ in; deploy runs the
// path they share.
type deployment struct {
	// act and reason are the failure's action and status reason
	// (status.ActionInstall and status.ReasonInstallError, ...).
	act, reason string
	// summary is the failure's first sentence.
	summary string
	// disableHooks is the watch's option for this action, for the preflight.
	disableHooks bool
	// crds is the watch's CRD policy for this action (crds.go).
	crds string
	// prepare runs after the preflight, before the CRDs are applied; nil:
	// nothing.
	prepare func() error
	// run runs Helm's action (runInstall, runUpgrade).
	run func() error
}

// deploy validates vals against the chart's schema, asks the API server for
// the permissions of the rendered manifest (preflight), applies the chart's
// CRDs as the watch's policy says and runs the action. A failure is an
// *Error with d's reason and action (see helmError).
func (r *Runner) deploy(ctx context.Context, before State, vals map[string]any, d deployment) error {
	if err := ValidateValues(r.Chart, vals, d.summary); err != nil {
		return withAction(err, d.reason, d.act)
	}
	// A chart that does not render here is left to Helm, which renders
	// again and says what is wrong.
	rendered, _ := r.render(vals, d.act == status.ActionUpgrade)
	r.nondeterministic = r.rendersDifferently(rendered, vals, d.act == status.ActionUpgrade)
	if err := r.renderedInScope(d.act, rendered); err != nil {
		return err
	}
	if err := r.preflight(ctx, d.act, before, rendered, d.disableHooks); err != nil {
		return err
	}
	if d.prepare != nil {
		if err := d.prepare(); err != nil {
			return err
		}
	}
	if _, err := r.applyCRDs(ctx, d.crds, d.act); err != nil {
		return err
	}
	// Judged with the chart's CRDs served: the scope of their objects is known.
	if err := r.finalizePlanned(rendered); err != nil {
		return err
	}
	if err := d.run(); err != nil {
		var strays *StraysError
		if errors.As(err, &strays) {
			// The post-renderer refused the manifest (internal/operator):
			// Helm stopped before it stored or applied anything.
			return RenderedOutOfScope(d.act, r.Name, r.Namespace, strays.Strays)
		}
		return r.permissionDenied(helmError(err, d.reason, d.act, d.summary))
	}
	return nil
}

// errRan stops helm-operator-plugins' client from running an action that an
// option already ran (see runOwn).
var errRan = errors.New("the action ran with a context")

// runOwn runs a Helm action as helm-operator-plugins' client configures it
// (its post-renderers and default options), with a context. That client runs
// actions without one, so submit hands the client an option that ends by
// calling last with the configured action's run; last runs it, tells the
// action registry how long it took, and returns errRan so that the client
// does not run it again.
func (r *Runner) runOwn(act string, submit func(last func(run func() error) error) error) error {
	var runErr error
	ran := false
	err := submit(func(run func() error) error {
		start := time.Now()
		runErr = run()
		if !r.refusedAsStale(runErr) {
			// A refused first write is no action (see observeNone).
			r.Actions.observed(r.Owner.Kind, act, start, runErr)
		}
		ran = true
		return errRan
	})
	if !ran {
		return err
	}
	return runErr
}

// helmError classifies an error Helm returned from an action.
func helmError(err error, reason, act, summary string) *Error {
	e := &Error{Reason: reason, Action: act, Summary: summary, Err: err}
	if tooLarge(e) || recordInvalid(e) {
		return e
	}
	if renderFailure(err) {
		e.StalledReason = status.ReasonChartRenderError
	}
	return e
}

// withAction marks a validation error as the failure of act.
func withAction(err error, reason, act string) error {
	if e, ok := err.(*Error); ok {
		if e.Reason == "" {
			e.Reason = reason
		}
		e.Action = act
		return e
	}
	return err
}
