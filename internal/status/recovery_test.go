package status

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// failedUpgrades returns the status after n consecutive failed upgrades of
// generation 2 under a budget of max.
func failedUpgrades(n, max int) Status {
	s := installed()
	for i := 0; i < n; i++ {
		s = Compute(s, upgradeFailure(2, max))
	}
	return s
}

func upgradeFailure(gen int64, max int) Outcome {
	return Outcome{Generation: gen, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
		Action: ActionUpgrade, MaxRetries: max, RetryAfter: 4e9,
		Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Revision: 2, Message: "Upgrade of release web to revision 2 failed: denied"}}
}

func TestComputeRetryBudget(t *testing.T) {
	tests := []struct {
		name         string
		prev         Status
		out          Outcome
		want         want
		failures     int64
		outOfRetries bool
		check        func(t *testing.T, s Status)
	}{{
		name: "a failure within the budget is retried",
		prev: failedUpgrades(1, 3), out: upgradeFailure(2, 3), failures: 2,
		want: want{TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying", TypeReady: "False/UpgradeError"},
	}, {
		name: "the failure that reaches maxRetries stalls the resource",
		prev: failedUpgrades(2, 3), out: upgradeFailure(2, 3), failures: 3, outOfRetries: true,
		want: want{TypeStalled: "True/RetriesExhausted", TypeReconciling: "False/Stalled", TypeReady: "False/RetriesExhausted",
			TypeReleaseFailed: "True/UpgradeError", TypeDeployed: "True/InstallSuccessful"},
		check: func(t *testing.T, s Status) {
			msg := meta.FindStatusCondition(s.Conditions, TypeStalled).Message
			for _, w := range []string{"Gave up after 3 consecutive failures", "maxRetries 3", "denied"} {
				if !strings.Contains(msg, w) {
					t.Errorf("Stalled message %q lacks %q", msg, w)
				}
			}
			if !RetriesExhausted(s, 2) || RetriesExhausted(s, 3) {
				t.Errorf("RetriesExhausted must hold for generation 2 only")
			}
			if s.DeployedRelease.Revision != 1 || s.FailedRelease.Revision != 2 {
				t.Errorf("deployed %+v failed %+v", s.DeployedRelease, s.FailedRelease)
			}
		},
	}, {
		name: "maxRetries 0 retries without bound",
		prev: failedUpgrades(50, 0), out: upgradeFailure(2, 0), failures: 51,
		want: want{TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying"},
	}, {
		name: "a new generation starts a fresh budget",
		prev: failedUpgrades(3, 3), out: upgradeFailure(3, 3), failures: 1,
		want: want{TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying"},
	}, {
		name: "a new retry request starts a fresh budget and is recorded",
		prev: failedUpgrades(3, 3),
		out:  func() Outcome { o := upgradeFailure(2, 3); o.Retry = "1"; return o }(), failures: 1,
		want: want{TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying"},
		check: func(t *testing.T, s Status) {
			if s.LastHandledRetry != "1" {
				t.Errorf("lastHandledRetry %q, want 1", s.LastHandledRetry)
			}
		},
	}, {
		name: "failures that write no revision keep backing off",
		prev: failedUpgrades(3, 3),
		out: Outcome{Generation: 2, Now: now, Initialized: true, MaxRetries: 3,
			Err: &Failure{Reason: ReasonErrorGettingReleaseState, Message: "etcd timeout"}}, failures: 4,
		want: want{TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying"},
	}, {
		name: "a failing uninstall keeps backing off",
		prev: failedUpgrades(3, 3),
		out: Outcome{Generation: 2, Now: now, Initialized: true, Deleting: true, MaxRetries: 3, Action: ActionUninstall,
			Err: &Failure{Reason: ReasonUninstallError, Action: ActionUninstall, Message: "hook denied"}}, failures: 4,
		want: want{TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying"},
	}, {
		name: "an invalid annotation stalls at once",
		prev: installed(),
		out: Outcome{Generation: 1, Now: now, MaxRetries: 3, Err: &Failure{Reason: ReasonInvalidAnnotation,
			StalledReason: ReasonInvalidAnnotation, Message: `The annotation helmapp.io/paused has the value "yes"; want true or false`}},
		failures: 1,
		want: want{TypeStalled: "True/InvalidAnnotation", TypeReady: "False/InvalidAnnotation",
			TypeIrreconcilable: "True/InvalidAnnotation", TypeReconciling: "False/Stalled", TypeDeployed: "True/InstallSuccessful"},
		check: func(t *testing.T, s Status) {
			if msg := meta.FindStatusCondition(s.Conditions, TypeReconciling).Message; !strings.Contains(msg, "annotation") {
				t.Errorf("Reconciling message %q does not point at the annotation", msg)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OutOfRetries(tt.prev, tt.out); got != tt.outOfRetries {
				t.Errorf("OutOfRetries = %v, want %v", got, tt.outOfRetries)
			}
			s := Compute(tt.prev, tt.out)
			checkConditions(t, s, tt.want)
			if s.Failures != tt.failures {
				t.Errorf("failures %d, want %d", s.Failures, tt.failures)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestComputePause(t *testing.T) {
	before := failedUpgrades(1, 3) // a failed upgrade of generation 2, being retried
	// The user pauses it and changes the spec: generation 3, nothing runs.
	paused := Compute(before, Outcome{Generation: 3, Now: now, Held: true, Paused: true})
	p := meta.FindStatusCondition(paused.Conditions, TypePaused)
	if p == nil || p.Status != metav1.ConditionTrue || p.Reason != ReasonReconcilePaused || p.ObservedGeneration != 3 ||
		!strings.Contains(p.Message, "helmapp.io/paused") {
		t.Fatalf("Paused = %+v", p)
	}
	// Everything else is as it was, observedGeneration included: the new
	// spec has not been acted on.
	rest := *paused.DeepCopy()
	meta.RemoveStatusCondition(&rest.Conditions, TypePaused)
	if !reflect.DeepEqual(rest, before) {
		t.Errorf("pausing changed more than the Paused condition:\nbefore %+v\nafter  %+v", before, rest)
	}
	// Held again while paused: nothing changes, so nothing is written.
	if again := Compute(paused, Outcome{Generation: 3, Now: now, Held: true, Paused: true}); !reflect.DeepEqual(again, paused) {
		t.Errorf("a second paused reconcile changed the status")
	}
	// A paused deletion says it waits.
	del := Compute(before, Outcome{Generation: 3, Now: now, Held: true, Paused: true, Deleting: true})
	if msg := meta.FindStatusCondition(del.Conditions, TypePaused).Message; !strings.Contains(msg, "deletion waits") {
		t.Errorf("Paused message while deleting: %q", msg)
	}
	// Unpaused while backing off: Paused goes, the rest stays.
	if unpaused := Compute(paused, Outcome{Generation: 3, Now: now, Held: true}); !reflect.DeepEqual(unpaused, before) {
		t.Errorf("unpausing a held resource: %+v", unpaused)
	}
	// Unpaused and reconciled: the spec change is applied, Paused is gone.
	done := Compute(paused, Outcome{Generation: 3, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(3),
		DeployedBy: ActionUpgrade, Action: ActionUpgrade})
	checkConditions(t, done, want{TypeReady: "True/UpgradeSuccessful"})
	if meta.FindStatusCondition(done.Conditions, TypePaused) != nil {
		t.Errorf("Paused kept after resuming")
	}
	if prog := Progressing(paused, 3, "Upgrading"); meta.FindStatusCondition(prog.Conditions, TypePaused) != nil {
		t.Errorf("Paused kept in the progress status after resuming")
	}
}
