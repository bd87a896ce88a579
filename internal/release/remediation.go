package release

import (
	"fmt"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Remediation says what follows a failed install or upgrade: watches.yaml's
// installRemediation and upgradeRemediation. The zero value does nothing: the
// failed revision stays in the history and the next attempt goes over it.
type Remediation struct {
	// RollbackFailedUpgrade rolls a failed upgrade back to the revision that
	// was deployed before it.
	RollbackFailedUpgrade bool
	// UninstallFailedInstall uninstalls a failed install (its objects and its
	// history), so that the next attempt is a fresh install at revision 1.
	UninstallFailedInstall bool
}

// remediate applies the watch's remediation to e, the failure of the action
// of res whose outcome Helm stored as after. It says what it did in e.Remedy
// and records in res what Helm's storage holds afterwards. It does nothing
// when Helm stored no revision for the attempt (the values or the chart were
// rejected before anything was touched).
//
// A rollback leaves the release deployed with the old values, so the next
// reconcile sees the spec differ and upgrades again: that is a retry like any
// other, held back by the reconciler's backoff because the reconcile that
// rolled back still reports the failure.
func (r *Runner) remediate(res *Result, after State, e *Error) {
	if e.Revision == 0 {
		return
	}
	switch {
	case res.Action == status.ActionUpgrade && r.Remediation.RollbackFailedUpgrade && after.Deployed != nil:
		target := after.Deployed.Version
		// A rollback applies the target's stored manifest and hooks and
		// deletes what the failed revision's lists beyond it: both are
		// read back from storage, and checked as such (scope.go).
		if err := r.RecordsInScope(after); err != nil {
			e.Remedy = fmt.Sprintf("not rolled back to revision %d: %s", target, err)
			return
		}
		if err := r.rollback(after.Deployed); err != nil {
			e.Remedy = fmt.Sprintf("rolling back to revision %d failed: %s", target, status.Foreign(err.Error()))
		} else {
			e.Remedy = fmt.Sprintf("rolled back to revision %d", target)
			res.DeployedBy = status.ActionRollback
		}
	case res.Action == status.ActionInstall && r.Remediation.UninstallFailedInstall && after.Deployed == nil:
		if err := r.uninstall(false); err != nil {
			e.Remedy = fmt.Sprintf("uninstalling the failed install failed: %s", status.Foreign(err.Error()))
		} else {
			e.Remedy = "the failed install was uninstalled; the next attempt installs afresh"
		}
	default:
		return
	}
	st, err := Observe(r.Client, r.Name)
	if err != nil {
		// What Helm holds now is unknown: the status keeps what it knew.
		res.State, res.Observed = State{}, false
		return
	}
	res.State, res.Observed = st, true
}
