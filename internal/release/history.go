package release

import (
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// madeRevisions returns the entries of status.history for the revisions a
// run of an install or upgrade made, newest first: the action's revision
// (causes), and the remediation's that followed a failure (a rollback, or
// the uninstall of a failed install). before is Helm's storage before the
// run, res the run's result, runErr its failure; chartVersion and digest
// describe what the action asked for (digest keyed by key, as every
// digest of values the status shows) (the action's own revision is gone
// from res.State after a rollback or an uninstall).
func madeRevisions(before State, res Result, runErr error, causes []status.Cause, chartVersion string, key DigestKey, digest string, started, finished metav1.Time) []status.HistoryEntry {
	if !res.Observed || (res.Action != status.ActionInstall && res.Action != status.ActionUpgrade) {
		return nil
	}
	prevLatest := 0
	if before.Latest != nil {
		prevLatest = before.Latest.Version
	}
	var e *Error
	errors.As(runErr, &e)
	after := res.State.Latest
	entry := func(rel *release.Release, act string, causes []status.Cause) status.HistoryEntry {
		h := status.HistoryEntry{Revision: rel.Version, Action: act, Causes: causes, ValuesDigest: key.Values(rel.Config),
			Started: &started, Finished: &finished}
		if rel.Chart != nil && rel.Chart.Metadata != nil {
			h.ChartVersion = rel.Chart.Metadata.Version
		}
		if rel.Info != nil {
			h.Status = rel.Info.Status.String()
		}
		return h
	}
	// The action's own revision when it is gone or not the latest: a
	// failed one, remediated.
	failed := func(rev int) status.HistoryEntry {
		return status.HistoryEntry{Revision: rev, Action: res.Action, Causes: causes, ChartVersion: chartVersion,
			ValuesDigest: digest, Status: release.StatusFailed.String(), Started: &started, Finished: &finished}
	}
	switch {
	case res.DeployedBy == status.ActionRollback && after != nil && e != nil && e.Revision > 0:
		rb := entry(after, status.ActionRollback, []status.Cause{{Type: status.CauseRemediation,
			Detail: fmt.Sprintf("upgrade to revision %d failed: rolled back to revision %d", e.Revision, rollbackTarget(after, e.Revision))}})
		return []status.HistoryEntry{rb, failed(e.Revision)}
	case after == nil && e != nil && e.Revision > 0 && res.Action == status.ActionInstall:
		un := failed(e.Revision)
		un.Action, un.Status = status.ActionUninstall, release.StatusUninstalled.String()
		un.Causes = []status.Cause{{Type: status.CauseRemediation, Detail: fmt.Sprintf("install of revision %d failed: uninstalled", e.Revision)}}
		return []status.HistoryEntry{un, failed(e.Revision)}
	case after != nil && after.Version > prevLatest:
		return []status.HistoryEntry{entry(after, res.Action, causes)}
	}
	return nil
}

// rollbackTarget is the revision a rollback revision restored, as Helm
// describes it ("Rollback to 2"), else the one before the failed revision.
func rollbackTarget(rb *release.Release, failed int) int {
	var n int
	if rb.Info != nil {
		if _, err := fmt.Sscanf(rb.Info.Description, "Rollback to %d", &n); err == nil {
			return n
		}
	}
	return failed - 1
}
