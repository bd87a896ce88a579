package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TypeChartUpgradePending is True while the resource waits, on its old
// chart, for its turn in the staged rollout of a new chart (watches.yaml
// rollout, docs/rollout.md); absent otherwise. It never changes Ready: a
// waiting resource serves on the old chart.
const TypeChartUpgradePending = "ChartUpgradePending"

// Reasons of ChartUpgradePending, and of the rollout's events.
const (
	// ReasonAwaitingRollout: ChartUpgradePending=True, the resource waits
	// for a free slot of the rollout's maxUnavailable.
	ReasonAwaitingRollout = "AwaitingRollout"
	// ReasonRolloutHalted: ChartUpgradePending=True, maxFailures resources
	// failed on the new chart; no more upgrades start until they are fixed
	// or retried. Also the Warning event on a resource whose failure halted it.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutStarted: the Normal event when a rollout first holds a
	// resource back.
	ReasonRolloutStarted = "RolloutStarted"
	// ReasonRolloutCompleted: the Normal event when every resource of a
	// rollout is upgraded and Ready.
	ReasonRolloutCompleted = "RolloutCompleted"
)

// maxRolloutNames bounds the failed resources a message names.
const maxRolloutNames = 5

// RolloutWait is why a resource waits in a rollout, as the rollout stands.
type RolloutWait struct {
	// Chart is the chart's name; From the version the resource runs, To
	// the new one.
	Chart, From, To string
	// Total resources in the rollout; Upgraded are on the new chart and
	// Ready, InProgress upgrading or not yet Ready, Failed failed on it.
	Total, Upgraded, InProgress, Failed int
	// Halted: Failed reached MaxFailures; FailedNames are "namespace/name".
	Halted      bool
	MaxFailures int
	FailedNames []string
}

// Message is ChartUpgradePending's message for w: "chart nginx 0.1.0 →
// 0.2.0: 12 of 50 upgraded, 5 in progress", and for a halted rollout the
// failed resources and what resumes it.
func (w RolloutWait) Message() string {
	head := fmt.Sprintf("chart %s %s → %s: %d of %d upgraded, %d in progress", w.Chart, w.From, w.To, w.Upgraded, w.Total, w.InProgress)
	if !w.Halted {
		return head + "; this resource upgrades when a slot frees (rollout.maxUnavailable)"
	}
	names := strings.Join(w.FailedNames[:min(len(w.FailedNames), maxRolloutNames)], ", ")
	if more := len(w.FailedNames) - maxRolloutNames; more > 0 {
		names += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%s; halted: %d failed on the new chart (rollout.maxFailures %d): %s; fix or retry them (annotation %s) to resume",
		head, w.Failed, w.MaxFailures, names, retryAnnotation)
}

// chartUpgradePending sets ChartUpgradePending from o.Rollout, and removes
// it when the resource does not wait.
func (c conditionSetter) chartUpgradePending(o Outcome) {
	if o.Rollout == nil {
		meta.RemoveStatusCondition(&c.s.Conditions, TypeChartUpgradePending)
		return
	}
	reason := ReasonAwaitingRollout
	if o.Rollout.Halted {
		reason = ReasonRolloutHalted
	}
	c.set(TypeChartUpgradePending, metav1.ConditionTrue, reason, o.Rollout.Message())
}
