package metrics

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// resourceInfoLabels are the labels of helmapp_resource_info: the resource,
// then what state returns.
var resourceInfoLabels = []string{"kind", "namespace", "name", "ready", "reason", "stalled", "reconciling", "paused"}

// maxReasonLength bounds a reason label value; the reasons of the status
// contract are far shorter.
const maxReasonLength = 64

// state returns the values of the state labels of helmapp_resource_info
// (ready, reason, stalled, reconciling, paused) for the conditions conds:
// each a condition status (True, False, Unknown) or a reason, both of the
// bounded vocabulary of internal/status. A condition the resource does not
// have is Unknown, except Paused, which is False when absent (its contract).
// A reason that is not a CamelCase word of the contract's shape becomes
// Unknown, so that no label value can ever carry free text.
func state(conds []metav1.Condition) []string {
	st := func(t, absent string) string {
		c := findCondition(conds, t)
		if c == nil {
			return absent
		}
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse:
			return string(c.Status)
		}
		return string(metav1.ConditionUnknown)
	}
	reason := string(metav1.ConditionUnknown)
	if c := findCondition(conds, status.TypeReady); c != nil && isReasonWord(c.Reason) {
		reason = c.Reason
	}
	unknown := string(metav1.ConditionUnknown)
	return []string{
		st(status.TypeReady, unknown), reason,
		st(status.TypeStalled, unknown), st(status.TypeReconciling, unknown),
		st(status.TypePaused, string(metav1.ConditionFalse)),
	}
}

// isReasonWord tells a reason of the shape metav1.Condition requires and
// the status contract uses: a letter, then letters and digits, bounded.
func isReasonWord(r string) bool {
	if r == "" || len(r) > maxReasonLength {
		return false
	}
	for i, c := range r {
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
