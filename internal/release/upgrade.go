package release

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// upgrade upgrades the release to vals and the watch's chart. A failed upgrade
// is not rolled back: the previous revision stays deployed and the failed one
// stays in the history, bounded by MaxHistory. Each hook is bounded by the
// runner's Timeout; ctx cancels the action.
//
// On failure it returns an *Error with reason UpgradeError, stalled with
// InvalidValues or ChartRenderError when the values or the chart are at fault
// (Helm then stored no revision and touched nothing deployed).
func (r *Runner) upgrade(ctx context.Context, before State, vals map[string]any) error {
	next := 1
	if before.Latest != nil {
		next = before.Latest.Version + 1
	}
	return r.deploy(ctx, before, vals, deployment{
		act: status.ActionUpgrade, reason: status.ReasonUpgradeError,
		summary:      fmt.Sprintf("Upgrade of release %s to revision %d failed", r.Name, next),
		disableHooks: r.Options.UpgradeDisableHooks,
		crds:         r.CRDs.forUpgrade(),
		run: func() error {
			return r.runUpgrade(ctx, vals, func(u *action.Upgrade) {
				u.MaxHistory = r.maxHistory()
				u.Labels = r.labels()
				r.Options.upgrade(u)
				r.describe(&u.Description)
			})
		},
	})
}

// runUpgrade runs Helm's upgrade (see runOwn) with ctx and the runner's
// Timeout.
func (r *Runner) runUpgrade(ctx context.Context, vals map[string]any, configure func(*action.Upgrade)) error {
	return r.runOwn(status.ActionUpgrade, func(last func(func() error) error) error {
		_, err := r.Client.Upgrade(r.Name, r.Namespace, r.Chart, vals, func(u *action.Upgrade) error {
			configure(u)
			u.Timeout = r.timeout()
			u.Namespace = r.Namespace
			return last(func() error {
				_, err := u.RunWithContext(ctx, r.Name, r.Chart, vals)
				return err
			})
		})
		return err
	})
}
