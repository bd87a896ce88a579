package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// DefaultMaxHistory bounds the revisions Helm keeps per release, so that
// retried failures cannot grow the history without limit.
const DefaultMaxHistory = 10

// DefaultTimeout bounds every Helm action, each hook included, when the
// watch sets no timeout.
const DefaultTimeout = 5 * time.Minute

// DefaultShutdownGrace is how long a running Helm action may go on once the
// operator is stopping, before it is cancelled.
const DefaultShutdownGrace = 30 * time.Second

// Services are the parts of a release's run that the whole process shares,
// built once (NewServices) and used by every kind's releases.
type Services struct {
	// Kube writes the releases' objects when a re-apply corrects their drift;
	// KubeReader reads them, uncached.
	Kube       client.Client
	KubeReader client.Reader
	// Live reads an object uncached, with its managedFields (the caches
	// drop them), once drift is found in it: who changed what (explain).
	// Nil means KubeReader.
	Live client.Reader
	// DriftMemo remembers what explaining each drifted object version
	// found, so that drift left standing is not read again on every
	// re-apply; nil means a new one.
	DriftMemo *DriftMemo
	// Access, when set, checks the permissions of a run's Identity before
	// every install, upgrade and re-apply (preflight.go).
	Access Reviewer
	// Actions is the process' registry of running actions and Tenure its
	// time as the one reconciling; they judge pending locks. Nil Actions:
	// no action is known to run; nil Tenure: one begun at the first use.
	Actions *Actions
	Tenure  *Tenure
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ShutdownGrace is how long a running install or upgrade may go on after
	// the reconcile's context is cancelled (the operator is stopping) before
	// it is cancelled too; 0 means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// DigestKey keys the values digest the status publishes (digest.go);
	// nil means a random key of this process alone.
	DigestKey DigestKey
}

// NewServices returns s with its defaults set: a clock, a registry of
// running actions, a tenure begun now and a digest key.
func NewServices(s Services) *Services {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Actions == nil {
		s.Actions = NewActions()
	}
	if s.Tenure == nil {
		s.Tenure = NewTenure(s.Now())
	}
	if s.Live == nil {
		s.Live = s.KubeReader
	}
	if s.DriftMemo == nil {
		s.DriftMemo = NewDriftMemo()
	}
	if len(s.DigestKey) == 0 {
		// crypto/rand does not fail on the platforms Go supports.
		s.DigestKey, _ = NewDigestKey()
	}
	return &s
}

// Shared is what every release of one kind shares: the process' Services
// and the kind's watch settings, built once per kind.
type Shared struct {
	*Services
	// Chart is the chart of the kind's watch, and ChartDigest its ChartDigest.
	Chart       *chart.Chart
	ChartDigest string
	// MaxHistory bounds the kept revisions on upgrade.
	MaxHistory int
	// Remediation says what follows a failed install or upgrade.
	Remediation Remediation
	// CRDs is what an install and an upgrade do with the chart's crds/.
	CRDs CRDPolicy
	// Timeout bounds every Helm action and each of its hooks, and is the age
	// after which a pending lock is stale; 0 means DefaultTimeout.
	Timeout time.Duration
	// Scope is what a release may hold beyond its namespace (scope.go).
	Scope Scope
	// Drift is what a re-apply does with drift (driftpolicy.go).
	Drift DriftPolicy
}

// Runner runs the plan for one release: what is its own is the resource's,
// the rest is Shared by the kind.
type Runner struct {
	*Shared
	// Client is the Helm action client for the resource.
	Client helmclient.ActionInterface
	// Name and Namespace of the release.
	Name, Namespace string
	// Owner is the resource the release belongs to; every revision written
	// carries its identity (see ClaimOf).
	Owner Owner
	// Identity is who the release's objects are written as: Client's
	// configuration and Writer act as it; Access checks its permissions.
	Identity Identity
	// Writer writes the objects a re-apply restores, as Identity; nil means Kube.
	Writer client.Client
	// Options are the resource's per-action Helm options (its annotations).
	Options HelmOptions
	// Generation is the resource's generation this run is for: a newer one
	// the primary watch sees preempts its waits (see Supersede).
	Generation int64
	// Known is the newest revision the resource's status names (deployed or
	// failed), 0 for none: a newer one that this process did not write is
	// someone else's (see Foreign).
	Known int
	// Recorded is the deployed revision the resource's status names, nil
	// for none: its manifest digest, which only the operator writes (the
	// status subresource), is what a record of that revision must still
	// hold to be acted on (trust.go).
	Recorded *status.DeployedRelease
	// Shard is the resource's values of the operator's shard label keys,
	// carried by every revision and object of the release (shard.go).
	Shard Shard
	// Finalize puts the finalizer on the resource, for why, before the run
	// writes what needs it (NeedsFinalizer); nil when the resource has it.
	// Unfinalize takes it off once what Helm stored no longer needs it; nil
	// when the resource has none, or needs it whatever its release holds.
	// KeptAt is where an earlier pass found the finalizer needed (the
	// latest record's name and resourceVersion, FinalizerVerdict.At): a pass
	// that finds the release there does not read it again to judge.
	Finalize   func(why string) error
	Unfinalize func() error
	KeptAt     string

	// records are the metadata of the release's record Secrets the pass
	// observed from the metadata cache; nil when it read the history.
	records []metav1.Object
	// crdsApplied names the CRDs this run created or updated.
	crdsApplied []string
	// noRecords: an Uninstall found no record of the release (FoundNoRecords).
	noRecords bool
	// assumedNone: the observation took the release to have no record, as
	// the metadata cache showed, without listing its history (see
	// observeNone).
	assumedNone bool
	// reobserved: the pass observed again after a stale view (Pass.run);
	// an action refused as existing is then reported (refusedAsStale).
	reobserved bool
	// description is the causes of the revision the run makes, in one
	// line: Helm's description of an install's or upgrade's revision.
	description string
	// nondeterministic names the templates a run's chart rendered
	// differently twice with the same input (rendersDifferently).
	nondeterministic []string
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
	// Skipped names the objects of the deployed revision a re-apply left
	// alone, and why: not the release's own, or missing while the record
	// is not one the operator vouches for (reapply).
	Skipped []string
	// DriftChecked is true when a re-apply compared every object with its
	// manifest; Drift is what it found, field by field with each field's
	// writer (nil: no drift), and whether it was corrected.
	DriftChecked bool
	Drift        *status.DriftFound
	// State is Helm's storage read back after the action, the truth for status;
	// Observed is false when it could not be read back.
	State    State
	Observed bool
	// Unlocked is the stale lock this run removed before its action, nil for none.
	Unlocked *Lock
	// CRDsApplied names the chart's CRDs the run created or updated (the
	// watch's crds policy), even when the action then failed.
	CRDsApplied []string
	// Nondeterministic names the chart's templates that rendered
	// differently twice with the same values and chart (randAlphaNum, now,
	// a lookup): what was deployed is one of their renders, and the
	// operator upgrades only when the values or the chart change.
	Nondeterministic []string
	// Succeeded is true when the install or upgrade completed and Helm's
	// storage, when it could be read back, agrees; a failure after it (the
	// read-back) does not undo it.
	Succeeded bool
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
	case PlanUnlock:
		return fmt.Sprintf("Unlocking release %s revision %d, left %s by an operation that never finished, and going on at revision %d",
			r.Name, st.Latest.Version, st.Latest.Info.Status, next)
	}
	return ""
}

// Run validates the values, runs the action plan calls for and, after an
// install or upgrade, reads Helm's storage back. On failure the returned error is an *Error whose Revision is
// the revision Helm stored for the attempt, if it stored one.
//
// An install or upgrade runs with a context that outlives ctx by
// ShutdownGrace: controller-runtime cancels the reconcile's context as soon
// as the operator starts stopping, and a Helm action cut short leaves its
// release pending, so the action gets the grace period to finish; then it is
// cancelled and Helm records it failed.
func (r *Runner) Run(ctx context.Context, plan Plan, before State, vals map[string]any) (res Result, err error) {
	defer func() {
		if res.Observed && res.State.Latest != nil && plan != PlanReapply && plan != PlanLocked {
			// What this process left, so that it is never taken for someone else's.
			r.Actions.noteWrote(r.Namespace, r.Name, r.Owner.UID, res.State.Latest.Version, Digest(res.State.Latest.Manifest))
		}
	}()
	var preempted *Superseded
	switch plan {
	case PlanInstall, PlanRetryInstall:
		res.Action = status.ActionInstall
		preempted, err = r.running(ctx, res.Action, func(ctx context.Context) error { return r.install(ctx, plan, before, vals) })
	case PlanUpgrade:
		res.Action = status.ActionUpgrade
		preempted, err = r.running(ctx, res.Action, func(ctx context.Context) error { return r.upgrade(ctx, before, vals) })
	case PlanReapply:
		// Re-applying writes no revision: what Helm stores is unchanged, so
		// the steady-state reconcile lists release storage once, not twice.
		res.Action = status.ActionReconcile
		res.State, res.Observed = before, true
		return res, r.reapply(ctx, before, &res)
	case PlanUnlock:
		return r.unlockAndRun(ctx, before, vals)
	case PlanLocked:
		res.State, res.Observed = before, true
		return res, r.locked(before)
	default:
		return res, fmt.Errorf("unknown plan %q", plan)
	}

	if r.refusedAsStale(err) {
		// Not the action's failure: the observation was stale (Pass.run
		// observes again). Nothing is read back or reported.
		return Result{}, errAssumedWrong
	}
	res.Succeeded = err == nil
	res.CRDsApplied = r.crdsApplied
	res.Nondeterministic = r.nondeterministic
	after, obsErr := Observe(r.Client, r.Name)
	if obsErr != nil {
		if err != nil {
			return res, err
		}
		// The action's verdict stands; only its read-back failed.
		return res, &Error{Reason: status.ReasonErrorGettingReleaseState,
			Summary: fmt.Sprintf("The %s of release %s succeeded, but reading it back from Helm's storage failed", res.Action, r.Name),
			Err:     errors.Unwrap(obsErr)}
	}
	res.State, res.Observed = after, true
	if err != nil {
		if e, ok := err.(*Error); ok {
			helmAction := "upgrade" // a retried install is an upgrade over the failed one
			if plan == PlanInstall {
				helmAction = "install"
			}
			if e.Revision == 0 {
				e.Revision = storedRevision(before, after)
				if e.Revision > 0 && preempted == nil {
					e.Err = nameHook(e.Err, after.Latest, helmAction, r.timeout())
				}
			}
			if preempted != nil {
				// The newer generation runs next: no remediation in between.
				r.superseded(e, preempted, after, helmAction)
				return res, err
			}
			r.remediate(&res, after, e)
		}
		return res, err
	}
	if after.Deployed == nil || after.Latest == nil || after.Deployed.Version != after.Latest.Version {
		// Helm reports success even when it could not record the outcome in
		// its storage; the storage is the truth.
		res.Succeeded = false
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

// unlockAndRun removes a stale lock and, in the same pass, runs the plan
// that follows from the storage read back: an install that never finished
// is installed again, an upgrade is upgraded over, and the last deployed
// revision stays the one deployed until then.
func (r *Runner) unlockAndRun(ctx context.Context, before State, vals map[string]any) (Result, error) {
	lock, err := r.unlock(before)
	if err != nil {
		return Result{State: before, Observed: true}, err
	}
	after, err := Observe(r.Client, r.Name)
	if err != nil {
		return Result{Unlocked: lock}, err
	}
	next := Decide(after, Desired{ValuesDigest: ValuesDigest(vals), ChartDigest: r.ChartDigest})
	if next == PlanUnlock || next == PlanLocked {
		return Result{Unlocked: lock, State: after, Observed: true}, &Error{Reason: status.ReasonReleaseLocked,
			Summary: fmt.Sprintf("Release %s is still locked after unlocking revision %d", r.Name, lock.Revision)}
	}
	res, err := r.Run(ctx, next, after, vals)
	res.Unlocked = lock
	return res, err
}

// running runs act as an action of this process on the release, recorded
// in the registry, with a context that outlives ctx by ShutdownGrace. It
// returns, with run's error, the preemption of a wait of the action by a
// newer generation, nil when none was preempted.
func (r *Runner) running(ctx context.Context, act string, run func(context.Context) error) (*Superseded, error) {
	actx, cancel := GraceContext(ctx, r.shutdownGrace())
	defer cancel()
	if r.Actions == nil {
		return nil, run(actx)
	}
	ra := r.Actions.begin(r.Namespace, r.Name, act, r.Owner.UID, r.Generation)
	defer r.Actions.end(r.Namespace, r.Name, ra)
	err := run(actx)
	if err == nil {
		return nil, nil
	}
	if r.refusedAsStale(err) {
		r.Actions.wroteNothing(ra)
	}
	return r.Actions.preemptedBy(ra), err
}

// refusedAsStale tells whether err is Helm's install or upgrade refused at
// its first write, the record of the revision it was to write, because
// that record exists: someone wrote it after the pass observed the release
// (a `helm upgrade` by hand landing first, or a metadata cache behind the
// API server; see observeNone). Helm wrote and applied nothing: the view
// was stale, not the action wrong, and the pass observes again and acts
// once more (Pass.run). A refusal after that is the action's failure.
func (r *Runner) refusedAsStale(err error) bool {
	return !r.reobserved && errors.Is(err, driver.ErrReleaseExists)
}

// GraceContext returns a context that is cancelled grace after ctx is, or
// when the returned cancel function is called.
func GraceContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(actx, func() { t.Stop() })
	})
	return actx, func() { stop(); cancel() }
}

// rollbackOptions configures a Helm rollback (the remediation of a failed
// upgrade, rollback.go) as the runner's other actions are: bounded by
// Timeout, each hook included.
func (r *Runner) rollbackOptions(rb *action.Rollback) {
	rb.Timeout = r.timeout()
	rb.MaxHistory = r.maxHistory()
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r *Runner) shutdownGrace() time.Duration {
	if r.ShutdownGrace > 0 {
		return r.ShutdownGrace
	}
	return DefaultShutdownGrace
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) tenure() *Tenure {
	if r.Tenure == nil {
		r.Tenure = NewTenure(r.now())
	}
	return r.Tenure
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

// describe sets an action's description (Helm's revision description) to
// the causes of the revision, unless the resource's description annotation
// set one: the user's word comes first.
func (r *Runner) describe(d *string) {
	if *d == "" {
		*d = r.description
	}
}

// chartVersion is the version of the watch's chart.
func (r *Runner) chartVersion() string {
	if r.Chart == nil || r.Chart.Metadata == nil {
		return ""
	}
	return r.Chart.Metadata.Version
}

func (r *Runner) labels() map[string]string {
	l := r.Owner.labels()
	l[LabelChartDigest] = r.ChartDigest
	for k, v := range r.Shard.Labels {
		l[k] = v
	}
	return l
}
