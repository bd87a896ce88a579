package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations users set to steer recovery, named in messages. The
// release package parses them (release.AnnotationPaused, AnnotationRetry).
const (
	pausedAnnotation = "helmapp.io/paused"
	retryAnnotation  = "helmapp.io/retry"
	// serviceAccountAnnotation names the ServiceAccount a resource's
	// release acts as (release.AnnotationServiceAccount).
	serviceAccountAnnotation = "helmapp.io/service-account"
)

// Failures is the count of consecutive failures after the reconcile o. A
// success resets it; a new generation and a new retry request start a fresh
// budget, so the failure of o is then the first. A refused action (see
// Failure.Refused) wrote nothing and is not counted: the count stays.
func Failures(prev Status, o Outcome) int64 {
	if o.Err == nil {
		return 0
	}
	if Repeats(prev, o.Generation, o.Err) {
		// The standing stall again: not a new failure.
		return prev.Failures
	}
	n := prev.Failures
	if o.Generation != prev.ObservedGeneration || o.Retry != "" {
		n = 0
	}
	if o.Err.Refused {
		return n
	}
	return n + 1
}

// OutOfRetries reports whether the failure of o uses up the retry budget: a
// retryable failed install or upgrade — the attempts that write a Helm
// revision — that brings the consecutive failures of the generation to
// o.MaxRetries. Other failures (reading Helm's storage, re-applying objects,
// a failing uninstall during deletion, an install or upgrade refused before
// it ran) write no revision and keep backing off without bound.
func OutOfRetries(prev Status, o Outcome) bool {
	return o.MaxRetries > 0 && o.Err != nil && !o.Err.Terminal() && !o.Err.Refused && !o.Deleting &&
		(o.Err.Action == ActionInstall || o.Err.Action == ActionUpgrade) &&
		Failures(prev, o) >= int64(o.MaxRetries)
}

// RetriesExhausted reports whether s says the retries of generation are used
// up. It reads the stored status, so the verdict survives a restart of the
// operator.
func RetriesExhausted(s Status, generation int64) bool {
	c := meta.FindStatusCondition(s.Conditions, TypeStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonRetriesExhausted &&
		s.ObservedGeneration == generation
}

// held is the status of a reconcile that ran nothing on purpose: prev as it
// was — deployedRelease, failedRelease, resources, every condition and
// observedGeneration, which stays at the generation last acted on — but for
// the Paused condition, set while paused and removed once not.
func held(prev Status, o Outcome) Status {
	s := *prev.DeepCopy()
	c := conditionSetter{s: &s, gen: o.Generation, now: o.Now}
	if !o.Paused {
		c.resumed()
		return s
	}
	msg := "Reconciling is paused by the annotation " + pausedAnnotation +
		": no Helm action runs and nothing in the cluster changes until it is removed"
	if o.Deleting {
		msg = "The deletion waits: reconciling is paused by the annotation " + pausedAnnotation +
			", and the release is uninstalled once it is removed"
	}
	c.set(TypePaused, metav1.ConditionTrue, ReasonReconcilePaused, msg)
	return s
}

// resumed removes the Paused condition: the resource is not paused.
func (c conditionSetter) resumed() { meta.RemoveStatusCondition(&c.s.Conditions, TypePaused) }

// StalledBySpec reports whether s says generation is stalled by its values
// or its chart (InvalidValues, ChartRenderError): evaluating it again gives
// the same verdict, so a later trigger of the same generation announces no
// progress and writes nothing.
func StalledBySpec(s Status, generation int64) bool {
	c := meta.FindStatusCondition(s.Conditions, TypeStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation &&
		(c.Reason == ReasonInvalidValues || c.Reason == ReasonChartRenderError || c.Reason == ReasonReleaseTooLarge ||
			c.Reason == ReasonOutOfScope)
}

// Uninstalled reports whether s says the release was uninstalled by an
// earlier reconcile (Deployed=False and ReleaseFailed=False
// UninstallSuccessful): a deletion retried for its finalizer only.
func Uninstalled(s Status) bool {
	d := meta.FindStatusCondition(s.Conditions, TypeDeployed)
	f := meta.FindStatusCondition(s.Conditions, TypeReleaseFailed)
	return d != nil && d.Status == metav1.ConditionFalse && d.Reason == ReasonUninstallSuccessful &&
		f != nil && f.Status == metav1.ConditionFalse && f.Reason == ReasonUninstallSuccessful
}

// refusedMessage says what follows an action refused before it ran (see
// Failure.Refused): a retry with the backoff, uncounted, and for a missing
// permission one at once when the namespace's RBAC changes.
func refusedMessage(o Outcome) string {
	if o.Err.Reason == ReasonValuesSourceNotFound {
		return fmt.Sprintf("The release waits for a source of its values, and nothing was written; trying again in %s, or at once when the Secret or ConfigMap changes; not counted against maxRetries", o.RetryAfter)
	}
	what := "The " + o.Err.Action
	if o.Err.Action == "" {
		what = "Reading the release's values"
	}
	if o.Err.Action == ActionReconcile {
		what = "Re-applying the release's objects"
	}
	msg := fmt.Sprintf("%s was refused before it ran, and nothing was written; trying again in %s", what, o.RetryAfter)
	if o.Err.Reason == ReasonPermissionDenied {
		msg += ", or at once when a Role or RoleBinding of the resource's namespace changes"
	}
	return msg + "; not counted against maxRetries"
}
