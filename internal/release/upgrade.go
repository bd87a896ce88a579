package release

import (
	"context"
	"fmt"
	"time"

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
	summary := fmt.Sprintf("Upgrade of release %s to revision %d failed", r.Name, next)
	if err := ValidateValues(r.Chart, vals, summary); err != nil {
		return withAction(err, status.ReasonUpgradeError, status.ActionUpgrade)
	}
	if err := r.preflight(ctx, status.ActionUpgrade, before, vals, r.Options.UpgradeDisableHooks); err != nil {
		return err
	}
	if _, err := r.applyCRDs(ctx, r.CRDs.forUpgrade(), status.ActionUpgrade); err != nil {
		return err
	}
	err := r.runUpgrade(ctx, vals, func(u *action.Upgrade) {
		u.MaxHistory = r.maxHistory()
		u.Labels = r.labels()
		r.Options.upgrade(u)
	})
	if err != nil {
		return r.permissionDenied(helmError(err, status.ReasonUpgradeError, status.ActionUpgrade, summary))
	}
	return nil
}

// runUpgrade is runInstall's counterpart for Helm's upgrade.
func (r *Runner) runUpgrade(ctx context.Context, vals map[string]any, configure func(*action.Upgrade)) error {
	var runErr error
	ran := false
	_, err := r.Client.Upgrade(r.Name, r.Namespace, r.Chart, vals, func(u *action.Upgrade) error {
		configure(u)
		u.Timeout = r.timeout()
		u.Namespace = r.Namespace
		start := time.Now()
		_, runErr = u.RunWithContext(ctx, r.Name, r.Chart, vals)
		r.Actions.observed(r.Owner.Kind, status.ActionUpgrade, start, runErr)
		ran = true
		return errRan
	})
	if !ran {
		return err
	}
	return runErr
}
