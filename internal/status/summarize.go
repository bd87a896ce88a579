package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Summarize sets Ready from the other conditions. It is the only place that
// writes Ready. Ready is True only when the resource's current generation is
// deployed, its objects are ready, and no failure stands; the first standing
// problem, in the order Stalled, ReleaseFailed, Irreconcilable,
// ResourcesReady, TestSuccess (unless its failures are ignored),
// Reconciling, gives Ready its reason and message, so
// `kubectl get` shows the cause in the Reason column. It also sets Phase, the
// one string the OpenShift console shows in its Status column, from Ready
// (see phase).
func Summarize(s *Status, generation int64) {
	ready := metav1.Condition{Type: TypeReady, ObservedGeneration: generation}
	find := func(t string) *metav1.Condition { return meta.FindStatusCondition(s.Conditions, t) }
	isTrue := func(t string) (*metav1.Condition, bool) {
		c := find(t)
		return c, c != nil && c.Status == metav1.ConditionTrue
	}

	// TestSuccess counts unless tests are off or their failures ignored.
	var tests *metav1.Condition
	if t := s.LastTestRun; t != nil && !t.IgnoreFailures {
		tests = find(TypeTestSuccess)
	}

	_, stalled := isTrue(TypeStalled)
	if c, ok := isTrue(TypeStalled); ok {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	} else if c, ok := isTrue(TypeReleaseFailed); ok {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	} else if c, ok := isTrue(TypeIrreconcilable); ok {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	} else if c := find(TypeResourcesReady); c != nil && c.Status != metav1.ConditionTrue && s.DeployedRelease != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	} else if c := tests; c != nil && c.Status == metav1.ConditionFalse {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	} else if c, ok := isTrue(TypeReconciling); ok {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, c.Reason, c.Message
	} else if c, ok := isTrue(TypeDeployed); ok && s.ObservedGeneration == generation {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, c.Reason, c.Message
	} else if c := find(TypeDeployed); c != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, c.Reason, c.Message
	} else {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionUnknown, ReasonProgressing,
			"The resource has not been reconciled yet"
	}
	meta.SetStatusCondition(&s.Conditions, ready)
	s.Phase = phase(ready, stalled)
}

// phase says Ready's verdict in one string: "Ready", "Stalled: <reason>",
// "NotReady: <reason>" or "Progressing: <reason>". The console shows
// status.phase, when set, instead of the list of every condition that is
// True (in which Stalled=True would look like Ready=True).
func phase(ready metav1.Condition, stalled bool) string {
	var word string
	switch {
	case ready.Status == metav1.ConditionTrue:
		return PhaseReady
	case stalled:
		word = PhaseStalled
	case ready.Status == metav1.ConditionFalse:
		word = PhaseNotReady
	default:
		word = PhaseProgressing
	}
	if ready.Reason == "" || ready.Reason == word {
		return word
	}
	return word + ": " + ready.Reason
}
