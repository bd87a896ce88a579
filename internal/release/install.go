package release

import (
	"fmt"

	"helm.sh/helm/v3/pkg/action"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// install installs the release. A release whose only revisions failed is
// installed again with an upgrade over the failed revision, which Helm allows
// and which keeps the failed attempt in the history for inspection.
//
// On failure it returns an *Error with reason InstallError, stalled with
// InvalidValues or ChartRenderError when the values or the chart are at fault.
func (r *Runner) install(plan Plan, before State, vals map[string]any) error {
	summary := fmt.Sprintf("Install of release %s failed", r.Name)
	if err := ValidateValues(r.Chart, vals, summary); err != nil {
		return withAction(err, status.ReasonInstallError, status.ActionInstall)
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
	var err error
	if plan == PlanRetryInstall {
		_, err = r.Client.Upgrade(r.Name, r.Namespace, r.Chart, vals, func(u *action.Upgrade) error {
			u.MaxHistory = r.maxHistory()
			u.Labels = r.labels()
			r.Options.retryInstall(u)
			return nil
		})
	} else {
		_, err = r.Client.Install(r.Name, r.Namespace, r.Chart, vals, func(i *action.Install) error {
			// An uninstalled release that kept its history is installed over.
			i.Replace = true
			i.Labels = r.labels()
			r.Options.install(i)
			return nil
		})
	}
	if err != nil {
		return helmError(err, status.ReasonInstallError, status.ActionInstall, summary)
	}
	return nil
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
