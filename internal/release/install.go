package release

import (
	"context"
	"fmt"

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
	return r.deploy(ctx, before, vals, deployment{
		act: status.ActionInstall, reason: status.ReasonInstallError,
		summary:      fmt.Sprintf("Install of release %s failed", r.Name),
		disableHooks: r.Options.InstallDisableHooks,
		crds:         r.CRDs.forInstall(),
		prepare: func() error {
			if plan != PlanRetryInstall || !r.Remediation.UninstallFailedInstall {
				return nil
			}
			// A failed install left before (the remediation failed, or was
			// turned on since): uninstall it so that this attempt starts afresh.
			if err := r.uninstall(false); err != nil {
				return &Error{Reason: status.ReasonInstallError, Action: status.ActionInstall,
					Summary: fmt.Sprintf("Uninstalling the failed install of release %s before installing it again failed", r.Name), Err: err}
			}
			plan = PlanInstall
			return nil
		},
		run: func() error {
			if plan == PlanRetryInstall {
				return r.runUpgrade(ctx, vals, func(u *action.Upgrade) {
					u.MaxHistory = r.maxHistory()
					u.Labels = r.labels()
					r.Options.retryInstall(u)
					r.describe(&u.Description)
				})
			}
			return r.runInstall(ctx, vals, func(i *action.Install) {
				// An uninstalled release that kept its history is installed over.
				i.Replace = true
				// The chart's crds/ were applied by the watch's policy (crds.go).
				i.SkipCRDs = true
				i.Labels = r.labels()
				r.Options.install(i)
				r.describe(&i.Description)
			})
		},
	})
}

// runInstall runs Helm's install (see runOwn) with ctx and the runner's
// Timeout.
func (r *Runner) runInstall(ctx context.Context, vals map[string]any, configure func(*action.Install)) error {
	return r.runOwn(status.ActionInstall, func(last func(func() error) error) error {
		_, err := r.Client.Install(r.Name, r.Namespace, r.Chart, vals, func(i *action.Install) error {
			configure(i)
			i.Timeout = r.timeout()
			i.ReleaseName, i.Namespace = r.Name, r.Namespace
			return last(func() error {
				_, err := i.RunWithContext(ctx, r.Chart, vals)
				return err
			})
		})
		return err
	})
}

func (r *Runner) maxHistory() int {
	if r.MaxHistory > 0 {
		return r.MaxHistory
	}
	return DefaultMaxHistory
}
