package release

import (
	"errors"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
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
}

// Observe reads the release's history from Helm's storage (one label-scoped
// List of Secrets). A release that was never installed gives an empty State.
func Observe(ac helmclient.ActionInterface, name string) (State, error) {
	hist, err := ac.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return State{}, nil
	}
	if err != nil {
		return State{}, &Error{Reason: status.ReasonErrorGettingReleaseState,
			Summary: fmt.Sprintf("Reading the history of release %s from Helm's storage", name), Err: err}
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
	// PlanPending means an operation that never finished holds the release's lock.
	PlanPending Plan = "Pending"
)

// Desired is what the resource asks for.
type Desired struct {
	ValuesDigest string
	ChartDigest  string
}

// Decide picks the next action from the state alone; it never touches the cluster.
func Decide(st State, want Desired) Plan {
	latest := st.Latest
	switch {
	case latest == nil || latest.Info == nil || latest.Info.Status == release.StatusUninstalled:
		return PlanInstall
	case latest.Info.Status.IsPending():
		return PlanPending
	case latest.Info.Status != release.StatusDeployed:
		// The latest attempt failed (or was superseded oddly): try again.
		if st.Deployed == nil {
			return PlanRetryInstall
		}
		return PlanUpgrade
	case ValuesDigest(latest.Config) != want.ValuesDigest || latest.Labels[LabelChartDigest] != want.ChartDigest:
		return PlanUpgrade
	default:
		return PlanReapply
	}
}

// Describe turns a Helm release into the status' description of it.
func Describe(r *release.Release) *status.DeployedRelease {
	if r == nil {
		return nil
	}
	d := &status.DeployedRelease{
		Name:           r.Name,
		Namespace:      r.Namespace,
		Revision:       r.Version,
		ValuesDigest:   ValuesDigest(r.Config),
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
