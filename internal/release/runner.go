package release

import (
	"context"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// DefaultMaxHistory bounds the revisions Helm keeps per release, so that
// retried failures cannot grow the history without limit.
const DefaultMaxHistory = 10

// Runner runs the plan for one release.
type Runner struct {
	// Client is the Helm action client for the resource.
	Client helmclient.ActionInterface
	// Chart is the chart of the resource's watch, and ChartDigest its ChartDigest.
	Chart       *chart.Chart
	ChartDigest string
	// Name and Namespace of the release.
	Name, Namespace string
	// Owner is the resource the release belongs to; every revision written
	// carries its identity (see ClaimOf).
	Owner Owner
	// MaxHistory bounds the kept revisions on upgrade.
	MaxHistory int
	// Remediation says what follows a failed install or upgrade.
	Remediation Remediation
	// Kube writes the release's objects when a re-apply corrects their drift;
	// KubeReader reads them, uncached.
	Kube       client.Client
	KubeReader client.Reader
	// Options are the resource's per-action Helm options (its annotations).
	Options HelmOptions
}

// Result is what running a plan did.
type Result struct {
	// Action is the status action attempted (status.ActionInstall, ...).
	Action string
	// DeployedBy is the action that deployed a new revision, empty when none
	// did; status.ActionRollback when a failed upgrade was rolled back.
	DeployedBy string
	// Drifted names the objects a re-apply found changed or deleted and
	// restored ("Deployment web (changed)").
	Drifted []string
	// State is Helm's storage read back after the action, the truth for status;
	// Observed is false when it could not be read back.
	State    State
	Observed bool
}

// ProgressMessage says what running plan is about to do, for the Reconciling
// condition that is written before the Helm call. It is empty for plans that
// change no release.
func (r *Runner) ProgressMessage(plan Plan, st State) string {
	next := 1
	if st.Latest != nil {
		next = st.Latest.Version + 1
	}
	switch plan {
	case PlanInstall:
		if st.Latest != nil {
			return fmt.Sprintf("Installing release %s again at revision %d", r.Name, next)
		}
		return fmt.Sprintf("Installing release %s at revision %d", r.Name, next)
	case PlanRetryInstall:
		if r.Remediation.UninstallFailedInstall {
			return fmt.Sprintf("Uninstalling the failed install of release %s and installing it again at revision 1", r.Name)
		}
		return fmt.Sprintf("Retrying the failed install of release %s at revision %d", r.Name, next)
	case PlanUpgrade:
		return fmt.Sprintf("Upgrading release %s to revision %d", r.Name, next)
	}
	return ""
}

// Run validates the values, runs the action plan calls for and, after an
// install or upgrade, reads Helm's storage back. On failure the returned error is an *Error whose Revision is
// the revision Helm stored for the attempt, if it stored one.
func (r *Runner) Run(ctx context.Context, plan Plan, before State, vals map[string]any) (Result, error) {
	var res Result
	var err error
	switch plan {
	case PlanInstall, PlanRetryInstall:
		res.Action = status.ActionInstall
		err = r.install(plan, before, vals)
	case PlanUpgrade:
		res.Action = status.ActionUpgrade
		err = r.upgrade(before, vals)
	case PlanReapply:
		// Re-applying writes no revision: what Helm stores is unchanged, so
		// the steady-state reconcile lists release storage once, not twice.
		res.Action = status.ActionReconcile
		res.State, res.Observed = before, true
		var err error
		res.Drifted, err = r.reapply(ctx, before)
		return res, err
	case PlanPending:
		res.State, res.Observed = before, true
		return res, r.pending(before)
	default:
		return res, fmt.Errorf("unknown plan %q", plan)
	}

	after, obsErr := Observe(r.Client, r.Name)
	if obsErr != nil {
		if err != nil {
			return res, err
		}
		return res, obsErr
	}
	res.State, res.Observed = after, true
	if err != nil {
		if e, ok := err.(*Error); ok {
			if e.Revision == 0 {
				e.Revision = storedRevision(before, after)
			}
			r.remediate(&res, after, e)
		}
		return res, err
	}
	if after.Deployed == nil || after.Latest == nil || after.Deployed.Version != after.Latest.Version {
		// Helm reports success even when it could not record the outcome in
		// its storage; the storage is the truth.
		reason := map[string]string{status.ActionInstall: status.ReasonInstallError, status.ActionUpgrade: status.ReasonUpgradeError}[res.Action]
		latest := "no revision"
		if after.Latest != nil && after.Latest.Info != nil {
			latest = fmt.Sprintf("revision %d as %s", after.Latest.Version, after.Latest.Info.Status)
		}
		return res, &Error{Reason: reason, Action: res.Action, Revision: storedRevision(before, after),
			Summary: fmt.Sprintf("The %s of release %s did not complete: Helm's storage shows %s", res.Action, r.Name, latest)}
	}
	res.DeployedBy = res.Action
	return res, nil
}

// storedRevision is the revision Helm wrote for a failed attempt: a newer
// latest revision than before, or 0 when Helm wrote none.
func storedRevision(before, after State) int {
	if after.Latest == nil {
		return 0
	}
	if before.Latest == nil || after.Latest.Version > before.Latest.Version {
		return after.Latest.Version
	}
	return 0
}

func (r *Runner) pending(st State) error {
	l := st.Latest
	return &Error{Reason: status.ReasonReleasePending,
		Summary: fmt.Sprintf("Release %s revision %d is locked in %s by an operation that never finished",
			r.Name, l.Version, l.Info.Status)}
}

func (r *Runner) labels() map[string]string {
	l := r.Owner.labels()
	l[LabelChartDigest] = r.ChartDigest
	return l
}
