package release

import (
	"errors"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Labels this operator adds to every release it writes. Helm keeps custom
// labels on the release record (the storage Secret), so the next reconcile can
// tell whether the chart changed without decoding subcharts, which Helm does
// not store.
const (
	LabelChartDigest = "helmapp.io/chart-digest"
)

// State is what Helm's storage holds for one release.
type State struct {
	// Latest is the newest revision, nil when there is none.
	Latest *release.Release
	// Deployed is the revision whose status is deployed, nil when none is.
	Deployed *release.Release
	// Lock is the verdict on a pending Latest, nil when Latest is not pending
	// or was not judged (see Runner.Observe).
	Lock *Lock
	// Foreign is the verdict on a Latest someone else wrote, nil when it is
	// not foreign or was not judged (see Runner.Foreign).
	Foreign *Foreign
	// Trimmed: Latest and Deployed are a settled revision as the memo keeps
	// it, without its hooks nor its chart's templates (ObserveSettled).
	Trimmed bool
}

// Observe reads the release's history from Helm's storage (one label-scoped
// List of Secrets). A release that was never installed gives an empty State.
//
// It reads the storage itself rather than through Helm's history action,
// which first asks the API server for its version (one more request on
// every observation) to check that the cluster is reachable: the list
// answers that as well.
func Observe(ac helmclient.ActionInterface, name string) (State, error) {
	var hist []*release.Release
	var err error
	if cfg := ac.Config(); cfg != nil && cfg.Releases != nil {
		hist, err = cfg.Releases.History(name)
		releaseutil.Reverse(hist, releaseutil.SortByRevision)
	} else {
		hist, err = ac.History(name)
	}
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return State{}, nil
	}
	if err != nil {
		e := &Error{Reason: status.ReasonErrorGettingReleaseState,
			Summary: fmt.Sprintf("Reading the history of release %s from Helm's storage", name), Err: err}
		recordInvalid(e)
		return State{}, e
	}
	var st State
	// History is sorted newest first.
	for _, r := range hist {
		if st.Latest == nil {
			st.Latest = r
		}
		if st.Deployed == nil && r.Info != nil && r.Info.Status == release.StatusDeployed {
			st.Deployed = r
		}
	}
	return st, nil
}

// Plan is the next action for a release.
type Plan string

const (
	// PlanInstall installs a release that does not exist (or was uninstalled).
	PlanInstall Plan = "Install"
	// PlanRetryInstall upgrades over a failed install; nothing was ever deployed.
	PlanRetryInstall Plan = "RetryInstall"
	// PlanUpgrade upgrades the release to new values or a new chart, or retries a failed upgrade.
	PlanUpgrade Plan = "Upgrade"
	// PlanReapply re-applies the deployed revision's objects to correct drift.
	PlanReapply Plan = "Reapply"
	// PlanUnlock marks a stale pending latest revision failed, then goes on
	// in the same pass with the plan that follows (see unlock.go).
	PlanUnlock Plan = "Unlock"
	// PlanLocked means a pending latest revision that is not stale yet holds
	// the release's lock: nothing runs until it is stale.
	PlanLocked Plan = "Locked"
)

// Desired is what the resource asks for.
type Desired struct {
	ValuesDigest string
	ChartDigest  string
}

// decisions is Decide's table: the first row whose condition holds gives the
// plan. st.Lock is the verdict on a pending latest revision (JudgeLock).
var decisions = []struct {
	when func(st State, want Desired) bool
	plan Plan
}{
	// Never installed, or uninstalled with its history kept.
	{func(st State, _ Desired) bool {
		l := st.Latest
		return l == nil || l.Info == nil || l.Info.Status == release.StatusUninstalled
	}, PlanInstall},
	// An operation left the release pending and nobody runs it any more.
	{func(st State, _ Desired) bool {
		return st.Latest.Info.Status.IsPending() && st.Lock != nil && st.Lock.Stale
	}, PlanUnlock},
	// Pending, and it may still be running somewhere: wait.
	{func(st State, _ Desired) bool { return st.Latest.Info.Status.IsPending() }, PlanLocked},
	// Someone else's uninstall is under way (this process' own run only on
	// deletion): wait for it to delete the records.
	{func(st State, _ Desired) bool { return st.Latest.Info.Status == release.StatusUninstalling }, PlanLocked},
	// The latest attempt failed (or was superseded oddly) and nothing was ever deployed.
	{func(st State, _ Desired) bool {
		return st.Latest.Info.Status != release.StatusDeployed && st.Deployed == nil
	}, PlanRetryInstall},
	// The latest attempt failed over a deployed revision: try again.
	{func(st State, _ Desired) bool { return st.Latest.Info.Status != release.StatusDeployed }, PlanUpgrade},
	// Someone else deployed a revision that is not what the resource asks
	// for, though its chart label may say so (Helm copies labels): undo it.
	{func(st State, _ Desired) bool { return st.Foreign != nil && !st.Foreign.Same }, PlanUpgrade},
	// The values or the chart changed.
	{func(st State, want Desired) bool {
		return ValuesDigest(st.Latest.Config) != want.ValuesDigest || st.Latest.Labels[LabelChartDigest] != want.ChartDigest
	}, PlanUpgrade},
	// Deployed as asked: correct drift.
	{func(State, Desired) bool { return true }, PlanReapply},
}

// Decide picks the next action from the state alone; it never touches the cluster.
func Decide(st State, want Desired) Plan {
	for _, d := range decisions {
		if d.when(st, want) {
			return d.plan
		}
	}
	return PlanReapply
}

// Describe turns a Helm release into the status' description of it, its
// values digested under key.
func Describe(r *release.Release, key DigestKey) *status.DeployedRelease {
	if r == nil {
		return nil
	}
	d := &status.DeployedRelease{
		Name:           r.Name,
		Namespace:      r.Namespace,
		Revision:       r.Version,
		ValuesDigest:   key.Values(r.Config),
		ManifestDigest: Digest(r.Manifest),
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		d.Chart = r.Chart.Metadata.Name
		d.ChartVersion = r.Chart.Metadata.Version
		d.AppVersion = r.Chart.Metadata.AppVersion
	}
	if r.Info != nil {
		d.Status = r.Info.Status.String()
		if !r.Info.FirstDeployed.IsZero() {
			t := metaTime(r.Info.FirstDeployed.Time)
			d.FirstDeployed = &t
		}
		if !r.Info.LastDeployed.IsZero() {
			t := metaTime(r.Info.LastDeployed.Time)
			d.LastDeployed = &t
		}
	}
	return d
}

// Observe reads the release's history like the package's Observe, and judges
// a pending latest revision with the runner's registry, tenure and timeout.
func (r *Runner) Observe() (State, error) {
	st, err := Observe(r.Client, r.Name)
	if err != nil || st.Latest == nil {
		return st, err
	}
	p := LockPolicy{Now: r.now(), Since: r.tenure().Since(), Timeout: r.timeout()}
	if r.Actions != nil {
		p.RunningHere = r.Actions.Running(r.Namespace, r.Name)
		p.EndedHere = r.Actions.EndedAt(r.Namespace, r.Name, r.Owner.UID)
	}
	st.Lock = JudgeLock(st.Latest, p)
	return st, nil
}

// DeletePlan is what the deletion of a resource does with its release.
type DeletePlan string

const (
	// DeleteUninstall uninstalls the release.
	DeleteUninstall DeletePlan = "Uninstall"
	// DeleteKeep keeps the release (helmapp.io/uninstall-on-delete:
	// "false") and disowns its objects and records (Disowner).
	DeleteKeep DeletePlan = "Keep"
	// DeleteNotOurs uninstalls nothing: the release is not the resource's own.
	DeleteNotOurs DeletePlan = "NotOurs"
	// DeleteSkip uninstalls nothing: the ServiceAccount the release is
	// uninstalled as is gone with its namespace, whose deletion deletes the
	// release's objects and its history.
	DeleteSkip DeletePlan = "Skip"
	// DeleteGone uninstalls nothing: an earlier pass uninstalled the release
	// and Helm's storage holds none of it.
	DeleteGone DeletePlan = "Gone"
)

// DeleteFacts is what the deletion of a resource knows of its release.
// A fact not gathered is its zero value: DecideDelete then answers
// DeleteUninstall unless a fact gathered decides, so that facts can be
// gathered one by one, in deleteDecisions' order, until one decides.
type DeleteFacts struct {
	// NotOurs says why the release is not the resource's own, empty when it is.
	NotOurs string
	// Keep: the resource asks to keep its release.
	Keep bool
	// ActorGone: the ServiceAccount to uninstall as is gone, and its
	// namespace is being deleted.
	ActorGone bool
	// Gone: the status says the release was uninstalled and Helm's storage
	// holds no revision of it.
	Gone bool
}

// deleteDecisions is DecideDelete's table: the first row whose condition
// holds gives the plan.
var deleteDecisions = []struct {
	when func(DeleteFacts) bool
	plan DeletePlan
}{
	// Deleting a resource never uninstalls a release that is not its own.
	{func(f DeleteFacts) bool { return f.NotOurs != "" }, DeleteNotOurs},
	{func(f DeleteFacts) bool { return f.Keep }, DeleteKeep},
	{func(f DeleteFacts) bool { return f.ActorGone }, DeleteSkip},
	// Only removing the finalizer failed last time: nothing to uninstall
	// again.
	{func(f DeleteFacts) bool { return f.Gone }, DeleteGone},
	{func(DeleteFacts) bool { return true }, DeleteUninstall},
}

// DecideDelete picks what the deletion of a resource does with its release
// from the facts alone; it never touches the cluster.
func DecideDelete(f DeleteFacts) DeletePlan {
	for _, d := range deleteDecisions {
		if d.when(f) {
			return d.plan
		}
	}
	return DeleteUninstall
}
