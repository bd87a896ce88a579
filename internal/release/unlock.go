package release

import (
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/release"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Lock is the verdict on a pending latest revision: the lock Helm takes on a
// release for the duration of an install, upgrade or rollback, which an
// operation that never finished (the process was killed, a hook hung) leaves
// behind, so that Helm refuses every later action ("another operation is in
// progress").
type Lock struct {
	// Revision and Status of the pending revision, and the Description
	// Helm recorded for it ("Preparing upgrade", a description given to
	// the helm CLI): what Helm's record tells of its holder.
	Revision    int
	Status      release.Status
	Description string
	// WrittenAt is when the operation wrote it (its lastDeployed), zero when
	// Helm's record does not say; Age is how long ago.
	WrittenAt time.Time
	Age       time.Duration
	// RunningHere is the action of this process that holds the lock, "" for none.
	RunningHere string
	// Stale tells that nobody runs the operation any more; Why says how that is known.
	Stale bool
	Why   string
	// UnlockAt is when a lock that is not stale yet becomes stale; zero when
	// it is stale or held by this process.
	UnlockAt time.Time
}

// LockPolicy is what a lock is judged against.
type LockPolicy struct {
	// Now is the time of the judgement.
	Now time.Time
	// Since is when this process became the one reconciling (Tenure).
	Since time.Time
	// Timeout is the watch's timeout: no action of any process runs longer.
	Timeout time.Duration
	// RunningHere is the action this process runs on the release, "" for none.
	RunningHere string
	// EndedHere is when the last action of this process on the release
	// ended, zero for none (Actions.EndedAt).
	EndedHere time.Time
}

// JudgeLock tells whether the pending revision rel is stale: no action of
// this process runs on it, and either it was written before this process
// became the one reconciling (then no process runs it: the one that wrote it
// stopped reconciling), or it was written before an action of this process on
// the release ended (that action wrote it and could not record its outcome),
// or it is older than the timeout, which bounds every action of every process. It returns nil when rel is not pending.
func JudgeLock(rel *release.Release, p LockPolicy) *Lock {
	if rel == nil || rel.Info == nil || !rel.Info.Status.IsPending() {
		return nil
	}
	l := &Lock{Revision: rel.Version, Status: rel.Info.Status, Description: rel.Info.Description, RunningHere: p.RunningHere}
	if !rel.Info.LastDeployed.IsZero() {
		l.WrittenAt = rel.Info.LastDeployed.Time
		l.Age = max(p.Now.Sub(l.WrittenAt), 0)
	}
	switch {
	case p.RunningHere != "":
		// This process runs it: it ends with the action.
	case l.WrittenAt.IsZero():
		l.Stale, l.Why = true, "Helm's record does not say when it was written"
	case l.WrittenAt.Before(p.Since):
		l.Stale, l.Why = true, fmt.Sprintf("it was written before this operator began reconciling at %s", stamp(p.Since))
	case !p.EndedHere.IsZero() && !l.WrittenAt.After(p.EndedHere):
		l.Stale, l.Why = true, "the action of this operator that wrote it ended without recording its outcome"
	case l.Age >= p.Timeout:
		l.Stale, l.Why = true, fmt.Sprintf("it is older than the watch's timeout %s", p.Timeout)
	default:
		l.UnlockAt = l.WrittenAt.Add(p.Timeout)
	}
	return l
}

// unlock marks the stale pending latest revision failed in Helm's storage,
// with a description saying who unlocked it and why; the revision stays in
// the history for inspection. It returns the lock it removed.
//
// On failure it returns an *Error with reason ReleaseLocked.
func (r *Runner) unlock(st State) (*Lock, error) {
	l, rel := st.Lock, st.Latest
	cfg := r.Client.Config()
	if l == nil || !l.Stale || cfg == nil || cfg.Releases == nil {
		return nil, &Error{Reason: status.ReasonReleaseLocked,
			Summary: fmt.Sprintf("Release %s is locked and cannot be unlocked", r.Name)}
	}
	rel.Info.Status = release.StatusFailed
	rel.Info.Description = fmt.Sprintf("Unlocked by helm-app-operator: left %s by an operation that never finished (%s)", l.Status, l.Why)
	if err := cfg.Releases.Update(rel); err != nil {
		return nil, &Error{Reason: status.ReasonReleaseLocked,
			Summary: fmt.Sprintf("Unlocking release %s revision %d (%s) failed", r.Name, l.Revision, l.Status), Err: err}
	}
	return l, nil
}

// locked is the failure of a release whose lock is not stale yet. A lock
// this process holds is retried after the backoff; one that someone else
// holds is watched, not waited out: the resource is reconciled as soon as
// the release's storage changes (the revision leaving pending, a new
// revision, a deletion), and at the latest when the lock becomes stale.
func (r *Runner) locked(st State) error {
	l := st.Lock
	if l == nil {
		l = &Lock{Revision: st.Latest.Version, Status: st.Latest.Info.Status}
	}
	e := &Error{Reason: status.ReasonReleaseLocked}
	switch {
	case st.Lock == nil && st.Latest.Info.Status == release.StatusUninstalling:
		e.Summary = fmt.Sprintf("Release %s revision %d is being uninstalled by an operation this operator is not running; "+
			"the resource is reconciled as soon as the release's storage changes (if that uninstall was interrupted, run helm uninstall %s -n %s again)",
			r.Name, l.Revision, r.Name, r.Namespace)
	case l.RunningHere != "":
		e.Summary = fmt.Sprintf("Release %s revision %d is locked in %s by the %s this operator is running (for %s)",
			r.Name, l.Revision, l.Status, l.RunningHere, l.Age.Round(time.Second))
	case l.UnlockAt.IsZero():
		e.Summary = fmt.Sprintf("Release %s revision %d is locked in %s by an operation that has not finished",
			r.Name, l.Revision, l.Status)
	default:
		e.Summary = fmt.Sprintf("Release %s revision %d is locked in %s by an operation this operator is not running%s, written %s ago; "+
			"the resource is reconciled as soon as the release's storage changes, and it is unlocked at %s, when it is older than the watch's timeout %s",
			r.Name, l.Revision, l.Status, holder(l.Description), l.Age.Round(time.Second), stamp(l.UnlockAt), r.timeout())
		// Come back when it is stale; a second more so that it is.
		e.RetryAfter = l.UnlockAt.Sub(r.now()) + time.Second
	}
	return e
}

// holder says what Helm's record tells of a lock's holder: the description
// it recorded, which is not the operator's text (it may quote anything).
func holder(description string) string {
	if description == "" {
		return ""
	}
	return fmt.Sprintf(` (Helm's record says "%s")`, status.Foreign(description))
}

// stamp formats t as the status does (RFC 3339, UTC, seconds).
func stamp(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }
