package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upgradeFailed is the status after an upgrade to revision 2 failed, revision
// 1 still deployed.
func upgradeFailed() Status {
	return Compute(installed(), Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
		Action: ActionUpgrade, Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Revision: 2, Message: "Upgrade of release web failed"}})
}

// The verdict on a Helm action comes from its own outcome, whatever fails
// after it (issue 10 item 1).
func TestActionVerdictSurvivesALaterFailure(t *testing.T) {
	tests := []struct {
		name string
		prev Status
		out  Outcome
		want want
	}{
		{"upgrade succeeded, reading it back failed", upgradeFailed(),
			Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade, ActionSucceeded: true,
				Err: &Failure{Reason: ReasonErrorGettingReleaseState, Message: "The upgrade of release web succeeded, but reading it back from Helm's storage failed: x"}},
			want{TypeReleaseFailed: "False/UpgradeSuccessful", TypeIrreconcilable: "True/ErrorGettingReleaseState",
				TypeReady: "False/ErrorGettingReleaseState", TypeReconciling: "True/Retrying"}},
		{"upgrade succeeded, judging readiness failed", upgradeFailed(),
			Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(2), DeployedBy: ActionUpgrade,
				Action: ActionUpgrade, ActionSucceeded: true,
				Err: &Failure{Reason: ReasonReconcileError, Action: ActionReconcile, Message: "Reading the objects of release web revision 2 failed"}},
			want{TypeReleaseFailed: "False/UpgradeSuccessful", TypeIrreconcilable: "True/ReconcileError", TypeDeployed: "True/UpgradeSuccessful"}},
		{"uninstalled, removing the finalizer failed", installed(),
			Outcome{Generation: 1, Now: now, Initialized: true, Deleting: true, DeployedKnown: true, Uninstalled: true,
				Action: ActionUninstall, ActionSucceeded: true,
				Err: &Failure{Reason: ReasonErrorRemovingFinalizer, Message: "The release was uninstalled but removing the finalizer failed"}},
			want{TypeReleaseFailed: "False/UninstallSuccessful", TypeDeployed: "False/UninstallSuccessful",
				TypeIrreconcilable: "True/ErrorRemovingFinalizer", TypeReady: "False/ErrorRemovingFinalizer"}},
		{"an upgrade that failed still fails", installed(),
			Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
				Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Message: "Upgrade failed"}},
			want{TypeReleaseFailed: "True/UpgradeError"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkConditions(t, Compute(tt.prev, tt.out), tt.want)
		})
	}
}

// An object that cannot be read makes ResourcesReady Unknown with its own
// reason, and the failure is retried, never waited on until a deadline
// (issue 10 item 3).
func TestUnreadableResources(t *testing.T) {
	d := rel(1)
	d.LastDeployed = &metav1.Time{Time: now.Add(-10 * 60 * 1e9)}
	s := Compute(installed(), Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: d,
		Readiness:        &Readiness{Unknown: true, Reason: ReasonResourcesUnreadable, Message: "Deployment web: reading it failed: forbidden"},
		ReadinessTimeout: 60 * 1e9, RetryAfter: 1e9,
		Err: &Failure{Reason: ReasonResourcesUnreadable, Message: "Reading the objects of release web failed: Deployment web: reading it failed: forbidden"}})
	checkConditions(t, s, want{TypeResourcesReady: "Unknown/ResourceReadError", TypeIrreconcilable: "True/ResourceReadError",
		TypeReconciling: "True/Retrying", TypeStalled: "False/NotStalled", TypeReady: "False/ResourceReadError"})
	if c := meta.FindStatusCondition(s.Conditions, TypeReady); c.Message == "" {
		t.Errorf("Ready has no message")
	}
}

// A generation stalled by its values or chart is known to stay so.
func TestStalledBySpec(t *testing.T) {
	stalled := Compute(installed(), Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
		Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, StalledReason: ReasonChartRenderError, Message: "render"}})
	tooLarge := Compute(installed(), Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
		Err: &Failure{Reason: ReasonReleaseTooLarge, Action: ActionUpgrade, StalledReason: ReasonReleaseTooLarge, Message: "too large"}})
	locked := Compute(installed(), Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
		Err: &Failure{Reason: ReasonInvalidAnnotation, StalledReason: ReasonInvalidAnnotation, Message: "bad"}})
	for _, tt := range []struct {
		name string
		s    Status
		gen  int64
		want bool
	}{
		{"chart render error, same generation", stalled, 2, true},
		{"chart render error, new generation", stalled, 3, false},
		{"release too large, same generation", tooLarge, 2, true},
		{"release too large, new generation", tooLarge, 3, false},
		{"invalid annotation", locked, 2, false},
		{"deployed", installed(), 1, false},
	} {
		if got := StalledBySpec(tt.s, tt.gen); got != tt.want {
			t.Errorf("%s: StalledBySpec = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestUninstalled(t *testing.T) {
	gone := Compute(installed(), Outcome{Generation: 1, Now: now, Initialized: true, Deleting: true, DeployedKnown: true, Uninstalled: true,
		Action: ActionUninstall, ActionSucceeded: true, Err: &Failure{Reason: ReasonErrorRemovingFinalizer, Message: "x"}})
	failed := Compute(installed(), Outcome{Generation: 1, Now: now, Initialized: true, Deleting: true, DeployedKnown: true, Action: ActionUninstall,
		Err: &Failure{Reason: ReasonUninstallError, Action: ActionUninstall, Message: "x"}})
	if !Uninstalled(gone) || Uninstalled(failed) || Uninstalled(installed()) {
		t.Errorf("Uninstalled: after the uninstall %v, after a failed one %v, installed %v", Uninstalled(gone), Uninstalled(failed), Uninstalled(installed()))
	}
}
