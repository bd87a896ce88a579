package status

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Outcome is what one reconcile observed and did. The reconciler records it;
// Compute turns it into status. Nothing here talks to the API server.
type Outcome struct {
	// Generation is the metadata.generation the reconcile worked on.
	Generation int64
	// Now stamps failedRelease.time.
	Now metav1.Time

	// Initialized is true once the resource is taken in hand (its
	// finalizer on it, when it needs one). Collected says it has none: its
	// objects and records are the garbage collector's to delete with it;
	// otherwise FinalizerWhy, when known, says why it has one.
	Initialized  bool
	Collected    bool
	FinalizerWhy string
	// Deleting is true when the resource is being deleted.
	Deleting bool

	// SourcesRead is true when the reconcile read the references of
	// valuesFrom: ValuesSources then replaces status.valuesSources (nil
	// removes it); otherwise the previous list stays.
	SourcesRead   bool
	ValuesSources []ValuesSource

	// DeployedKnown is false when Helm's storage could not be read; the
	// previous deployedRelease is then kept rather than erased.
	DeployedKnown bool
	// Deployed is the deployed release read back from Helm's storage, or nil.
	Deployed *DeployedRelease
	// DeployedBy is the action that produced Deployed when this reconcile ran
	// one (ActionInstall or ActionUpgrade); empty otherwise.
	DeployedBy string

	// Action is the Helm action this reconcile attempted: ActionInstall,
	// ActionUpgrade, ActionUninstall, ActionReconcile, or empty for none.
	Action string
	// ActionSucceeded is true when Action completed, even if a later step of
	// the reconcile failed (reading it back, judging readiness, removing the
	// finalizer): the verdict on a Helm action comes from its own outcome.
	ActionSucceeded bool
	// Uninstalled is true when the release is gone after a deletion.
	Uninstalled bool
	// DeletionPending, set with Uninstalled, says which objects of the
	// uninstalled release are not gone yet (uninstallWait): the finalizer stays.
	DeletionPending string

	// Err is the failure of this reconcile; nil when it succeeded.
	Err *Failure
	// RetryAfter is when a retryable failure is tried again.
	RetryAfter time.Duration

	// Readiness is the readiness of the deployed release's objects, when this
	// reconcile judged it; nil keeps the previous verdict, with the
	// observedGeneration of the reconcile that judged it.
	Readiness *Readiness
	// ReadinessTimeout is how long after a deployment its objects may take to
	// become ready before the resource is Stalled; 0 means no limit.
	ReadinessTimeout time.Duration

	// MaxRetries bounds the consecutive failed installs and upgrades of one
	// generation (watches.yaml maxRetries); 0 means no bound.
	MaxRetries int
	// Retry is the new value of the annotation helmapp.io/retry that this
	// reconcile acts on: the retry budget starts afresh and
	// lastHandledRetry records it. Empty when there is none.
	Retry string
	// Held is true when the reconcile ran nothing on purpose: the resource
	// is paused, backing off, or out of retries. The status then stays as it
	// was, but for the Paused condition.
	Held bool
	// Paused is true while the annotation helmapp.io/paused is "true".
	Paused bool

	// TestsEnabled is the watch's test.enable: without it TestSuccess and
	// lastTestRun are removed.
	TestsEnabled bool
	// Test is the run of the chart's test hooks this reconcile did, nil for
	// none (the last run's record stays); unfinished (no CompletedAt) while
	// it runs. TestFailure says which hook failed and why, empty when none did.
	Test        *TestRun
	TestFailure string
	// TestRequest is the new value of the annotation helmapp.io/test that
	// this reconcile acts on; lastHandledTest records it.
	TestRequest string

	// History are the revisions made, newest first, for status.history;
	// Nondeterministic the templates that rendered differently twice
	// before the install or upgrade (Deployed's message; history.go).
	History          []HistoryEntry
	Nondeterministic []string

	// Rollout says why the resource waits for its upgrade to a new chart
	// (watches.yaml rollout); nil when it does not wait.
	Rollout *RolloutWait

	// DriftChecked is true when a re-apply compared the deployed release's
	// objects with their manifest; Drift is what it found (nil: no drift)
	// and DriftWhy, for drift not corrected, says why ("the watch's drift
	// mode is warn"). DriftOff: the watch turns drift checks off, so no
	// Drifted condition is kept.
	DriftChecked bool
	Drift        *DriftFound
	DriftWhy     string
	DriftOff     bool
}

// Readiness is the verdict on the deployed release's objects.
type Readiness struct {
	Resources Resources
	// AllReady: every object is Current.
	AllReady bool
	// Unknown: an object could not be read; ResourcesReady is then Unknown.
	Unknown bool
	// Reason and Message of the ResourcesReady condition.
	Reason, Message string
	// RecheckAt is when the causes of the objects that are not ready are
	// due to be looked up again (pods and events are not watched); zero when
	// none is. It is not written: the reconciler looks again then.
	RecheckAt time.Time
}

// Failure is a classified error: where it was born decides its reason.
type Failure struct {
	// Reason is the condition reason (InstallError, ErrorGettingReleaseState, ...).
	Reason string
	// Action is set for failures of a Helm action (install, upgrade, uninstall,
	// reconcile); such failures are recorded in failedRelease.
	Action string
	// Revision is the revision Helm stored for the failed attempt, 0 for none.
	Revision int
	// Message is one line saying what failed and why; bounded by Compute.
	Message string
	// StalledReason is set when no progress is possible without a change to the
	// resource (InvalidValues, ChartRenderError); the failure is then not retried.
	StalledReason string
	// Refused is set when the action was refused before it ran, by the
	// operator's own check of the identity's permissions (PermissionDenied,
	// ServiceAccountNotFound): nothing was written and Helm stored no
	// revision, so it is not counted in failures nor against maxRetries. It
	// is retried with the backoff for as long as it lasts, and at once when
	// a Role or RoleBinding of the resource's namespace changes.
	Refused bool
}

// Terminal reports whether retrying cannot help.
func (f *Failure) Terminal() bool { return f != nil && f.StalledReason != "" }

// Compute returns the status that follows prev after the reconcile described by o.
// It is pure: the same inputs give the same status.
func Compute(prev Status, o Outcome) Status {
	if o.Held {
		return held(prev, o)
	}
	s := *prev.DeepCopy()
	s.ObservedGeneration = o.Generation
	if o.Retry != "" {
		s.LastHandledRetry = o.Retry
	}
	if o.TestRequest != "" {
		s.LastHandledTest = o.TestRequest
	}
	if o.DeployedKnown {
		s.DeployedRelease = o.Deployed
	}
	if o.SourcesRead {
		s.ValuesSources = o.ValuesSources
	}
	s.History = AddHistory(prev.History, o.History)
	if o.Action == ActionInstall || o.Action == ActionUpgrade {
		s.LastAttemptedGeneration = o.Generation
	}
	s.Failures = Failures(prev, o)
	if o.Err != nil && !Repeats(prev, o.Generation, o.Err) {
		if o.Err.Action != "" {
			s.FailedRelease = &FailedRelease{
				Revision: o.Err.Revision,
				Action:   o.Err.Action,
				Reason:   o.Err.Reason,
				Message:  Bound(o.Err.Message, MaxMessageLength),
				Time:     o.Now,
			}
		}
	}

	c := conditionSetter{s: &s, gen: o.Generation, now: o.Now}
	c.resumed()
	c.initialized(o)
	c.deployed(prev, o)
	c.releaseFailed(o)
	c.irreconcilable(o)
	c.resourcesReady(o)
	c.stalledAndReconciling(o, OutOfRetries(prev, o))
	c.testSuccess(o)
	c.chartUpgradePending(o)
	c.drifted(prev, o)
	// A verdict kept from an earlier reconcile still holds for this
	// generation, but for a readiness verdict not judged this time: its
	// observedGeneration stays that of the reconcile that judged it.
	for i := range s.Conditions {
		if s.Conditions[i].Type == TypeResourcesReady && o.Readiness == nil && s.DeployedRelease != nil {
			continue
		}
		s.Conditions[i].ObservedGeneration = o.Generation
	}
	Summarize(&s, o.Generation)
	return s
}

// Repeats tells whether f is a terminal failure that prev already reports for
// generation: Stalled=True with the same reason and message. Such a repeat
// is not counted again and emits nothing, so a stalled resource that is
// reconciled again (a resync, an unrelated annotation) stays quiet.
func Repeats(prev Status, generation int64, f *Failure) bool {
	if !f.Terminal() {
		return false
	}
	c := meta.FindStatusCondition(prev.Conditions, TypeStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation &&
		c.Reason == f.StalledReason && c.Message == Bound(f.Message, MaxMessageLength)
}

// ReadinessDeadline is when the deployed release's objects are due to be
// ready, or the zero time when there is no deadline: timeout after the later
// of the last deployment and the moment they stopped being ready, so that a
// release deployed long ago that loses readiness gets the whole timeout too.
func ReadinessDeadline(s Status, timeout time.Duration) time.Time {
	if timeout <= 0 || s.DeployedRelease == nil || s.DeployedRelease.LastDeployed == nil {
		return time.Time{}
	}
	start := s.DeployedRelease.LastDeployed.Time
	if rr := meta.FindStatusCondition(s.Conditions, TypeResourcesReady); rr != nil &&
		rr.Status != metav1.ConditionTrue && rr.LastTransitionTime.After(start) {
		start = rr.LastTransitionTime.Time
	}
	return start.Add(timeout)
}

func (c conditionSetter) resourcesReady(o Outcome) {
	switch {
	case c.s.DeployedRelease == nil:
		c.s.Resources = nil
		c.set(TypeResourcesReady, metav1.ConditionFalse, ReasonNoRelease, "No release is deployed")
	case o.Readiness != nil:
		r := o.Readiness.Resources
		c.s.Resources = &r
		st := metav1.ConditionFalse
		switch {
		case o.Readiness.AllReady:
			st = metav1.ConditionTrue
		case o.Readiness.Unknown:
			st = metav1.ConditionUnknown
		}
		c.set(TypeResourcesReady, st, o.Readiness.Reason, o.Readiness.Message)
	}
	// Otherwise readiness was not judged this time: the last verdict stands.
}

// resourcesPending tells whether the deployed release's objects are not all
// ready, and whether their readiness deadline has passed.
func (c conditionSetter) resourcesPending(o Outcome) (pending, late bool) {
	rr := meta.FindStatusCondition(c.s.Conditions, TypeResourcesReady)
	if c.s.DeployedRelease == nil || rr == nil || rr.Status == metav1.ConditionTrue {
		return false, false
	}
	d := ReadinessDeadline(*c.s, o.ReadinessTimeout)
	return true, !d.IsZero() && !o.Now.Time.Before(d)
}

// Progressing returns prev with Reconciling=True and Ready=Unknown, saying what
// is under way. It is patched before a long Helm call so that a user watching
// sees the work; the domain conditions keep their last known truth.
func Progressing(prev Status, generation int64, msg string) Status {
	s := *prev.DeepCopy()
	c := conditionSetter{s: &s, gen: generation}
	c.resumed()
	reason := ReasonProgressing
	c.set(TypeReconciling, metav1.ConditionTrue, reason, msg)
	Summarize(&s, generation)
	return s
}

type conditionSetter struct {
	s   *Status
	gen int64
	// now stamps lastTransitionTime when a condition flips; zero means the
	// wall clock.
	now metav1.Time
}

func (c conditionSetter) set(typ string, st metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.s.Conditions, metav1.Condition{
		Type:               typ,
		Status:             st,
		ObservedGeneration: c.gen,
		LastTransitionTime: c.now,
		Reason:             reason,
		Message:            Bound(msg, MaxMessageLength),
	})
}

func (c conditionSetter) initialized(o Outcome) {
	switch {
	case o.Initialized && o.Collected:
		c.set(TypeInitialized, metav1.ConditionTrue, ReasonInitialized,
			"The resource is managed by this operator; its objects and release records are garbage-collected with it when it is deleted")
	case o.Initialized && o.FinalizerWhy != "":
		c.set(TypeInitialized, metav1.ConditionTrue, ReasonInitialized,
			"The resource is managed by this operator; its release is uninstalled when it is deleted ("+o.FinalizerWhy+")")
	case o.Initialized:
		c.set(TypeInitialized, metav1.ConditionTrue, ReasonInitialized,
			"The resource is managed by this operator; its release is uninstalled when it is deleted")
	case o.Err != nil && o.Err.Reason == ReasonErrorAddingFinalizer:
		c.set(TypeInitialized, metav1.ConditionFalse, ReasonErrorAddingFinalizer, o.Err.Message)
	}
}

func (c conditionSetter) deployed(prev Status, o Outcome) {
	d := c.s.DeployedRelease
	switch {
	case d != nil:
		reason := ReasonUpgradeSuccessful
		switch {
		case o.DeployedBy == ActionInstall:
			reason = ReasonInstallSuccessful
		case o.DeployedBy == ActionRollback:
			reason = ReasonRollbackSuccessful
		case o.DeployedBy == "":
			// Nothing was deployed by this reconcile: keep the reason of the
			// reconcile that did, when the condition still describes this revision.
			if old := meta.FindStatusCondition(prev.Conditions, TypeDeployed); old != nil &&
				old.Status == metav1.ConditionTrue && prev.DeployedRelease != nil &&
				prev.DeployedRelease.Revision == d.Revision {
				reason = old.Reason
			} else if d.Revision == 1 {
				reason = ReasonInstallSuccessful
			}
		}
		msg := fmt.Sprintf("Release %s revision %d of chart %s %s is deployed", d.Name, d.Revision, d.Chart, d.ChartVersion)
		c.set(TypeDeployed, metav1.ConditionTrue, reason, msg+nondeterministicNote(prev, o, d.Revision))
	case o.Uninstalled:
		c.set(TypeDeployed, metav1.ConditionFalse, ReasonUninstallSuccessful, "The release was uninstalled")
	case o.Deleting && o.DeployedKnown:
		c.set(TypeDeployed, metav1.ConditionFalse, ReasonUninstalling,
			"No revision is deployed: the release is being uninstalled and its objects may be partly removed")
	case !o.DeployedKnown:
		if meta.FindStatusCondition(c.s.Conditions, TypeDeployed) == nil {
			c.set(TypeDeployed, metav1.ConditionUnknown, ReasonErrorGettingReleaseState,
				"The release state could not be read from Helm's storage")
		}
	case o.Err != nil && o.Err.StalledReason == ReasonReleaseNameConflict:
		c.set(TypeDeployed, metav1.ConditionFalse, ReasonNotDeployed,
			"No release of this resource is deployed: its release name is taken (see Stalled)")
	case o.Err != nil && o.Err.Action == ActionInstall:
		c.set(TypeDeployed, metav1.ConditionFalse, ReasonNotDeployed, "No release is deployed: the install failed")
	default:
		c.set(TypeDeployed, metav1.ConditionFalse, ReasonNotDeployed, "No release is deployed yet")
	}
}

func (c conditionSetter) releaseFailed(o Outcome) {
	switch {
	case o.Err != nil && isReleaseAction(o.Err.Action):
		c.set(TypeReleaseFailed, metav1.ConditionTrue, o.Err.Reason, o.Err.Message)
	case (o.Err == nil || o.ActionSucceeded) && isReleaseAction(o.Action):
		reason := map[string]string{
			ActionInstall: ReasonInstallSuccessful, ActionUpgrade: ReasonUpgradeSuccessful,
			ActionUninstall: ReasonUninstallSuccessful,
		}[o.Action]
		c.set(TypeReleaseFailed, metav1.ConditionFalse, reason, "The latest "+o.Action+" succeeded")
	case meta.FindStatusCondition(c.s.Conditions, TypeReleaseFailed) == nil:
		c.set(TypeReleaseFailed, metav1.ConditionFalse, ReasonNoFailure, "No Helm action has failed")
	}
	// Otherwise no Helm action ran to an outcome: the previous verdict stands.
}

func (c conditionSetter) irreconcilable(o Outcome) {
	switch {
	case o.Err == nil:
		c.set(TypeIrreconcilable, metav1.ConditionFalse, ReasonReconcileSuccessful, "The last reconcile completed")
	case !isReleaseAction(o.Err.Action):
		c.set(TypeIrreconcilable, metav1.ConditionTrue, o.Err.Reason, o.Err.Message)
	default:
		// A Helm install, upgrade or uninstall failed: the reconcile itself got
		// through; ReleaseFailed carries the verdict.
		c.set(TypeIrreconcilable, metav1.ConditionFalse, ReasonNoReconcileError,
			"Client, values and release state were read; see ReleaseFailed for the release's outcome")
	}
}

func (c conditionSetter) stalledAndReconciling(o Outcome, outOfRetries bool) {
	switch {
	case o.Err.Terminal():
		c.set(TypeStalled, metav1.ConditionTrue, o.Err.StalledReason, o.Err.Message)
		msg := "No progress is possible until the resource's spec changes"
		switch o.Err.StalledReason {
		case ReasonReleaseNameConflict:
			msg = "Waiting for the release name to be free: the resource installs once the other release is removed"
		case ReasonInvalidReleaseName:
			msg = "No progress is possible: recreate the resource with a shorter name"
		case ReasonInvalidAnnotation:
			msg = "No progress is possible until the annotation is corrected"
		case ReasonReleaseRecordInvalid:
			msg = "No progress is possible until the release record named in Stalled is deleted or repaired"
		case ReasonServiceAccountRequired:
			msg = "No progress is possible until the resource names a ServiceAccount with the annotation " + serviceAccountAnnotation
		case ReasonServiceAccountsDisabled:
			msg = "No progress is possible until the ServiceAccount is no longer named, or the operator runs with --service-accounts"
		case ReasonOutOfScope:
			msg = "Nothing is applied until the resource's spec renders objects within the watch's scope, or the record named in Stalled is removed or restored"
		}
		c.set(TypeReconciling, metav1.ConditionFalse, ReasonStalled, msg)
	case outOfRetries:
		c.set(TypeStalled, metav1.ConditionTrue, ReasonRetriesExhausted, fmt.Sprintf(
			"Gave up after %d consecutive failures (maxRetries %d); the last: %s", c.s.Failures, o.MaxRetries, o.Err.Message))
		c.set(TypeReconciling, metav1.ConditionFalse, ReasonStalled,
			"No more attempts until the spec changes or the annotation "+retryAnnotation+" is set to a new value")
	case o.Err != nil:
		c.set(TypeStalled, metav1.ConditionFalse, ReasonNotStalled, "Retrying may succeed")
		what := "The reconcile"
		if o.Err.Action != "" {
			what = "The " + o.Err.Action
		}
		msg := fmt.Sprintf("%s failed (%d consecutive failures); retrying in %s", what, c.s.Failures, o.RetryAfter)
		if o.Err.Reason == ReasonReleaseLocked {
			msg = fmt.Sprintf("Waiting for the release's lock to be released or to become stale; trying again in %s", o.RetryAfter)
		}
		if o.Err.Refused {
			msg = refusedMessage(o)
		}
		if o.Deleting {
			msg = fmt.Sprintf("The deletion is being retried in %s (%d consecutive failures); the finalizer stays until the release is uninstalled", o.RetryAfter, c.s.Failures)
		}
		c.set(TypeReconciling, metav1.ConditionTrue, ReasonRetrying, msg)
	default:
		if pending, late := c.resourcesPending(o); pending {
			rr := meta.FindStatusCondition(c.s.Conditions, TypeResourcesReady)
			if late {
				c.set(TypeStalled, metav1.ConditionTrue, ReasonProgressDeadlineExceeded, fmt.Sprintf(
					"The release's resources were not ready %s after the deployment: %s", o.ReadinessTimeout, rr.Message))
				c.set(TypeReconciling, metav1.ConditionFalse, ReasonStalled,
					"Waiting for the resources to become ready or for a change to the resource")
			} else {
				c.set(TypeStalled, metav1.ConditionFalse, ReasonNotStalled, "The resource is not stalled")
				c.set(TypeReconciling, metav1.ConditionTrue, ReasonProgressing,
					"Waiting for the release's resources to become ready: "+rr.Message)
			}
			return
		}
		c.set(TypeStalled, metav1.ConditionFalse, ReasonNotStalled, "The resource is not stalled")
		if o.DeletionPending != "" {
			c.set(TypeReconciling, metav1.ConditionTrue, ReasonDeleting, o.DeletionPending)
			return
		}
		msg := "The resource is reconciled"
		if d := c.s.DeployedRelease; d != nil {
			msg = fmt.Sprintf("Release %s revision %d is reconciled", d.Name, d.Revision)
		}
		if o.Uninstalled {
			msg = "The release is uninstalled"
		}
		c.set(TypeReconciling, metav1.ConditionFalse, ReasonSucceeded, msg)
	}
}

func isReleaseAction(a string) bool {
	return a == ActionInstall || a == ActionUpgrade || a == ActionUninstall
}

// testSuccess records the test run of o and its verdict in TestSuccess;
// a run under way also makes Reconciling True.
func (c conditionSetter) testSuccess(o Outcome) {
	if !o.TestsEnabled {
		meta.RemoveStatusCondition(&c.s.Conditions, TypeTestSuccess)
		c.s.LastTestRun = nil
		return
	}
	if o.Test == nil {
		return
	}
	run := o.Test.DeepCopy()
	c.s.LastTestRun = run
	switch {
	case run.CompletedAt == nil:
		msg := fmt.Sprintf("Running the test hooks of revision %d", run.Revision)
		c.set(TypeTestSuccess, metav1.ConditionUnknown, ReasonAwaitingTests, msg)
		c.set(TypeReconciling, metav1.ConditionTrue, ReasonAwaitingTests, msg)
	case o.TestFailure != "":
		c.set(TypeTestSuccess, metav1.ConditionFalse, ReasonTestFailed, o.TestFailure)
	case len(run.Hooks) == 0:
		c.set(TypeTestSuccess, metav1.ConditionTrue, ReasonTestSucceeded,
			fmt.Sprintf("Revision %d has no test hooks", run.Revision))
	default:
		names := make([]string, len(run.Hooks))
		for i, h := range run.Hooks {
			names[i] = h.Name
		}
		c.set(TypeTestSuccess, metav1.ConditionTrue, ReasonTestSucceeded,
			fmt.Sprintf("The test hooks of revision %d succeeded: %s", run.Revision, strings.Join(names, ", ")))
	}
}
