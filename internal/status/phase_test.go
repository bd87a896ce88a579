package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPhaseSaysReadysVerdict checks that Summarize derives status.phase, the
// console's Status column, from Ready and Stalled: a stalled resource never
// reads like a ready one.
func TestPhaseSaysReadysVerdict(t *testing.T) {
	cond := func(typ string, st metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: "m", ObservedGeneration: 1}
	}
	deployed := &DeployedRelease{Name: "web", Revision: 1}
	tests := []struct {
		name  string
		s     Status
		want  string
		ready metav1.ConditionStatus
	}{
		{"deployed and ready", Status{ObservedGeneration: 1, DeployedRelease: deployed, Conditions: []metav1.Condition{
			cond(TypeDeployed, metav1.ConditionTrue, ReasonInstallSuccessful),
			cond(TypeResourcesReady, metav1.ConditionTrue, ReasonAllResourcesCurrent),
		}}, PhaseReady, metav1.ConditionTrue},
		{"stalled although deployed", Status{ObservedGeneration: 1, DeployedRelease: deployed, Conditions: []metav1.Condition{
			cond(TypeDeployed, metav1.ConditionTrue, ReasonInstallSuccessful),
			cond(TypeStalled, metav1.ConditionTrue, ReasonReleaseNameConflict),
		}}, "Stalled: ReleaseNameConflict", metav1.ConditionFalse},
		{"failed upgrade", Status{ObservedGeneration: 1, DeployedRelease: deployed, Conditions: []metav1.Condition{
			cond(TypeDeployed, metav1.ConditionTrue, ReasonInstallSuccessful),
			cond(TypeReleaseFailed, metav1.ConditionTrue, ReasonUpgradeError),
		}}, "NotReady: UpgradeError", metav1.ConditionFalse},
		{"under way", Status{Conditions: []metav1.Condition{
			cond(TypeReconciling, metav1.ConditionTrue, ReasonRetrying),
		}}, "Progressing: Retrying", metav1.ConditionUnknown},
		{"never reconciled", Status{}, PhaseProgressing, metav1.ConditionUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			Summarize(&s, 1)
			if s.Phase != tt.want {
				t.Errorf("phase = %q, want %q", s.Phase, tt.want)
			}
			for _, c := range s.Conditions {
				if c.Type == TypeReady && c.Status != tt.ready {
					t.Errorf("Ready = %s, want %s", c.Status, tt.ready)
				}
			}
		})
	}
}
