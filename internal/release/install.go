package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// install installs the release. A release whose only revisions failed is
// installed again with an upgrade over the failed revision, which Helm allows
// and which keeps the failed attempt in the history for inspection. Each hook
// is bounded by the runner's Timeout; ctx cancels the action.
//
// On failure it returns an *Error with reason InstallError, stalled with
// InvalidValues or ChartRenderError when the values or the chart are at fault,
// or with reason ReleaseTooLarge, stalled, when the revision does not fit the
// storage (nothing was applied then).
func (r *Runner) install(ctx context.Context, plan Plan, before State, vals map[string]any) error {
	summary := fmt.Sprintf("Install of release %s failed", r.Name)
	if err := ValidateValues(r.Chart, vals, summary); err != nil {
		return withAction(err, status.ReasonInstallError, status.ActionInstall)
	}
	if err := r.preflight(ctx, status.ActionInstall, before, vals, r.Options.InstallDisableHooks); err != nil {
		return err
	}
	if plan == PlanRetryInstall && r.Remediation.UninstallFailedInstall {
		// A failed install left before (the remediation failed, or was
		// turned on since): uninstall it so that this attempt starts afresh.
		if err := r.uninstall(false); err != nil {
			return &Error{Reason: status.ReasonInstallError, Action: status.ActionInstall,
				Summary: fmt.Sprintf("Uninstalling the failed install of release %s before installing it again failed", r.Name), Err: err}
		}
		plan = PlanInstall
	}
	if _, err := r.applyCRDs(ctx, r.CRDs.forInstall(), status.ActionInstall); err != nil {
		return err
	}
	var err error
	if plan == PlanRetryInstall {
		err = r.runUpgrade(ctx, vals, func(u *action.Upgrade) {
			u.MaxHistory = r.maxHistory()
			u.Labels = r.labels()
			r.Options.retryInstall(u)
		})
	} else {
		err = r.runInstall(ctx, vals, func(i *action.Install) {
			// An uninstalled release that kept its history is installed over.
			i.Replace = true
			// The chart's crds/ were applied by the watch's policy (crds.go).
			i.SkipCRDs = true
			i.Labels = r.labels()
			r.Options.install(i)
		})
	}
	if err != nil {
		return r.permissionDenied(helmError(err, status.ReasonInstallError, status.ActionInstall, summary))
	}
	return nil
}

// errRan stops helm-operator-plugins' client from running an action that an
// option already ran (see runInstall).
var errRan = errors.New("the action ran with a context")

// runInstall runs Helm's install as the action client configures it (its
// post-renderers and default options), with ctx and the runner's Timeout.
// helm-operator-plugins' client runs actions without a context, so the last
// option runs the configured action itself with RunWithContext, and returns
// errRan so that the client does not run it again.
func (r *Runner) runInstall(ctx context.Context, vals map[string]any, configure func(*action.Install)) error {
	var runErr error
	ran := false
	_, err := r.Client.Install(r.Name, r.Namespace, r.Chart, vals, func(i *action.Install) error {
		configure(i)
		i.Timeout = r.timeout()
		i.ReleaseName, i.Namespace = r.Name, r.Namespace
		start := time.Now()
		_, runErr = i.RunWithContext(ctx, r.Chart, vals)
		r.Actions.observed(r.Owner.Kind, status.ActionInstall, start, runErr)
		ran = true
		return errRan
	})
	if !ran {
		return err
	}
	return runErr
}

func (r *Runner) maxHistory() int {
	if r.MaxHistory > 0 {
		return r.MaxHistory
	}
	return DefaultMaxHistory
}

// helmError classifies an error Helm returned from an action.
func helmError(err error, reason, act, summary string) *Error {
	e := &Error{Reason: reason, Action: act, Summary: summary, Err: err}
	if tooLarge(e) {
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
