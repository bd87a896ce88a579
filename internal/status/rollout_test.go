package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
)

func TestComputeChartUpgradePending(t *testing.T) {
	awaiting := &RolloutWait{Chart: "nginx", From: "0.1.0", To: "0.2.0", Total: 50, Upgraded: 12, InProgress: 5, MaxFailures: 1}
	halted := &RolloutWait{Chart: "nginx", From: "0.1.0", To: "0.2.0", Total: 50, Upgraded: 12, InProgress: 0, Failed: 1,
		Halted: true, MaxFailures: 1, FailedNames: []string{"team-a/web"}}
	waiting := func() Status {
		return Compute(installed(), Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
			Action: ActionReconcile, ActionSucceeded: true, Rollout: awaiting})
	}
	tests := []struct {
		name    string
		prev    func() Status
		out     Outcome
		want    want
		absent  bool
		message []string
	}{
		{name: "waiting for a slot: Ready stays True", prev: installed, out: Outcome{Rollout: awaiting},
			want:    want{TypeChartUpgradePending: "True/AwaitingRollout", TypeReady: "True/InstallSuccessful", TypeReconciling: "False/Succeeded"},
			message: []string{"chart nginx 0.1.0 → 0.2.0: 12 of 50 upgraded, 5 in progress"}},
		{name: "halted: names the failed resources, Ready stays True", prev: waiting, out: Outcome{Rollout: halted},
			want:    want{TypeChartUpgradePending: "True/RolloutHalted", TypeReady: "True/InstallSuccessful"},
			message: []string{"halted: 1 failed on the new chart (rollout.maxFailures 1): team-a/web", "helmapp.io/retry"}},
		{name: "nothing pending: removed", prev: waiting, out: Outcome{},
			want: want{TypeReady: "True/InstallSuccessful"}, absent: true},
		{name: "never waited: absent", prev: installed, out: Outcome{},
			want: want{TypeReady: "True/InstallSuccessful"}, absent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.out
			o.Generation, o.Now, o.Initialized, o.DeployedKnown, o.Deployed = 1, now, true, true, rel(1)
			o.Action, o.ActionSucceeded = ActionReconcile, true
			s := Compute(tt.prev(), o)
			checkConditions(t, s, tt.want)
			c := meta.FindStatusCondition(s.Conditions, TypeChartUpgradePending)
			if tt.absent {
				if c != nil {
					t.Fatalf("ChartUpgradePending %+v, want it absent", c)
				}
				return
			}
			for _, m := range tt.message {
				if !strings.Contains(c.Message, m) {
					t.Errorf("ChartUpgradePending message %q, want it to say %q", c.Message, m)
				}
			}
		})
	}
	// A held reconcile (paused, backing off) keeps the condition as it was.
	s := Compute(waiting(), Outcome{Generation: 1, Now: now, Held: true})
	if c := meta.FindStatusCondition(s.Conditions, TypeChartUpgradePending); c == nil || c.Reason != ReasonAwaitingRollout {
		t.Errorf("held: ChartUpgradePending %+v, want it kept", c)
	}
}

func TestRolloutWaitMessageBoundsNames(t *testing.T) {
	w := RolloutWait{Chart: "c", From: "1", To: "2", Total: 9, Failed: 7, Halted: true, MaxFailures: 3,
		FailedNames: []string{"n/a", "n/b", "n/c", "n/d", "n/e", "n/f", "n/g"}}
	m := w.Message()
	if !strings.Contains(m, "n/a, n/b, n/c, n/d, n/e and 2 more") || strings.Contains(m, "n/f") {
		t.Errorf("message %q, want 5 names and \"and 2 more\"", m)
	}
}
