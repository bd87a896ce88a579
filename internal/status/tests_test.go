package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testRun(rev int, done bool, hooks ...TestHook) *TestRun {
	r := &TestRun{Revision: rev, StartedAt: now, Hooks: hooks}
	if done {
		c := metav1.NewTime(now.Add(3e9))
		r.CompletedAt = &c
	}
	return r
}

func TestComputeTestSuccess(t *testing.T) {
	ok := TestHook{Name: "web-test", Phase: "Succeeded"}
	failed := TestHook{Name: "web-test", Phase: "Failed"}
	ignoring := func(r *TestRun) *TestRun { r.IgnoreFailures = true; return r }
	installedTested := func() Status {
		return Compute(installed(), Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
			Action: ActionReconcile, ActionSucceeded: true, TestsEnabled: true, Test: testRun(1, false, ok)})
	}
	failure := "Test hook web-test of release web revision 1 failed: job web-test failed: BackoffLimitExceeded"
	tests := []struct {
		name     string
		prev     func() Status
		out      Outcome
		want     want
		absent   bool   // TestSuccess and lastTestRun must be gone
		message  string // in TestSuccess' message
		recorded int    // hooks in lastTestRun
	}{
		{name: "running tests: Unknown, Ready waits", prev: installed,
			out:     Outcome{TestsEnabled: true, Test: testRun(1, false, ok)},
			want:    want{TypeTestSuccess: "Unknown/AwaitingTests", TypeReconciling: "True/AwaitingTests", TypeReady: "Unknown/AwaitingTests"},
			message: "revision 1", recorded: 1},
		{name: "tests succeeded: Ready", prev: installedTested,
			out:     Outcome{TestsEnabled: true, Test: testRun(1, true, ok)},
			want:    want{TypeTestSuccess: "True/TestSucceeded", TypeReady: "True/InstallSuccessful", TypeReconciling: "False/Succeeded"},
			message: "web-test", recorded: 1},
		{name: "no test hooks: succeeded", prev: installed,
			out:     Outcome{TestsEnabled: true, Test: testRun(1, true)},
			want:    want{TypeTestSuccess: "True/TestSucceeded", TypeReady: "True/InstallSuccessful"},
			message: "no test hooks"},
		{name: "test failed: not Ready, naming the hook", prev: installedTested,
			out:     Outcome{TestsEnabled: true, Test: testRun(1, true, failed), TestFailure: failure},
			want:    want{TypeTestSuccess: "False/TestFailed", TypeReady: "False/TestFailed", TypeDeployed: "True/InstallSuccessful", TypeReleaseFailed: "False/InstallSuccessful"},
			message: "BackoffLimitExceeded", recorded: 1},
		{name: "test failed, failures ignored: Ready", prev: installedTested,
			out:     Outcome{TestsEnabled: true, Test: ignoring(testRun(1, true, failed)), TestFailure: failure},
			want:    want{TypeTestSuccess: "False/TestFailed", TypeReady: "True/InstallSuccessful"},
			message: "web-test", recorded: 1},
		{name: "no run this reconcile: the last verdict stays", prev: func() Status {
			return Compute(installedTested(), Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
				Action: ActionReconcile, ActionSucceeded: true, TestsEnabled: true, Test: testRun(1, true, failed), TestFailure: failure})
		},
			out:     Outcome{TestsEnabled: true},
			want:    want{TypeTestSuccess: "False/TestFailed", TypeReady: "False/TestFailed"},
			message: "web-test", recorded: 1},
		{name: "tests turned off: condition and record removed", prev: installedTested,
			out:  Outcome{},
			want: want{TypeReady: "True/InstallSuccessful"}, absent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.out
			o.Generation, o.Now, o.Initialized, o.DeployedKnown, o.Deployed = 1, now, true, true, rel(1)
			o.Action, o.ActionSucceeded = ActionReconcile, true
			s := Compute(tt.prev(), o)
			checkConditions(t, s, tt.want)
			c := meta.FindStatusCondition(s.Conditions, TypeTestSuccess)
			if tt.absent {
				if c != nil || s.LastTestRun != nil {
					t.Fatalf("TestSuccess %v and lastTestRun %v, want both gone", c, s.LastTestRun)
				}
				return
			}
			if !strings.Contains(c.Message, tt.message) {
				t.Errorf("TestSuccess message %q, want it to say %q", c.Message, tt.message)
			}
			if s.LastTestRun == nil || s.LastTestRun.Revision != 1 || len(s.LastTestRun.Hooks) != tt.recorded {
				t.Errorf("lastTestRun %+v, want revision 1 with %d hooks", s.LastTestRun, tt.recorded)
			}
		})
	}
}

// A new value of helmapp.io/test is recorded once acted on.
func TestComputeRecordsHandledTestRequest(t *testing.T) {
	s := Compute(installed(), Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
		Action: ActionReconcile, ActionSucceeded: true, TestsEnabled: true, TestRequest: "2", Test: testRun(1, true)})
	if s.LastHandledTest != "2" {
		t.Fatalf("lastHandledTest %q, want 2", s.LastHandledTest)
	}
	s = Compute(s, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), TestsEnabled: true})
	if s.LastHandledTest != "2" {
		t.Fatalf("lastHandledTest %q after a reconcile without a request, want 2 kept", s.LastHandledTest)
	}
}
