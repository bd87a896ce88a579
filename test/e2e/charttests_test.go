//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// On the full local cluster the chart's test hook is a Job that really runs
// (kwok completes its pod, the Job controller the Job): after the install
// the operator runs it (watches.yaml test.enable) and reports
// TestSuccess=True TestSucceeded with the run in status.lastTestRun; Ready
// is True; the test run wrote no revision.
func TestChartTestJobSucceeds(t *testing.T) {
	e := newEnv(t, "e2e-chart-test", watchOptions{tested: true})
	e.apply("bulky-t", "apiVersion: test.helmapp.io/v1\nkind: Bulky\nmetadata:\n  name: t\nspec: {}\n")
	var n *nginx
	var run map[string]any
	e.eventually("t", "bulky/t TestSuccess=True and Ready", func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(testedGVR).Namespace(e.ns).Get(ctx, "t", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n = &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		run, _, _ = unstructured.NestedMap(u.Object, "status", "lastTestRun")
		c := n.cond("TestSuccess")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "TestSucceeded" && n.is(typeReady, metav1.ConditionTrue),
			fmt.Sprintf("%s; lastTestRun %v", n, run)
	})
	hooks, _ := run["hooks"].([]any)
	if len(hooks) != 1 {
		e.fatalf("lastTestRun %v: want the one test hook", run)
	}
	h := hooks[0].(map[string]any)
	if h["name"] != "t-test" || h["phase"] != "Succeeded" || h["completedAt"] == nil || run["revision"] != int64(1) {
		e.t.Errorf("lastTestRun %v: want revision 1, hook t-test Succeeded with its times", run)
	}
	if st := e.kubectl("get", "job", "t-test", "-o", `jsonpath={.status.succeeded}`); strings.TrimSpace(st) != "1" {
		e.t.Errorf("the test Job did not succeed: status.succeeded %q", st)
	}
	e.waitEvent("t", "TestSucceeded")
	e.checkHistory("t", 1, n)
}

// On the full local cluster a chart's test hook whose pod fails (kwok
// terminates its container with reason Error, exit code 1; see
// controlplane.FailPodLabel) makes TestSuccess False TestFailed, naming the
// hook and its pod's reason, and Ready False; status.lastTestRun records
// the hook Failed with its times; nothing of the pod's log (the container's
// termination message) is in the status. The hook is a Pod. Beside it, in
// another namespace with its own operator, the same chart with a Job hook
// and test.ignoreFailures: TestFailed names the Job's failed pod, and Ready
// stays True.
func TestChartTestPodFails(t *testing.T) {
	strict := newEnv(t, "e2e-test-fails", watchOptions{tested: true, testedChart: "failtested"})
	ignored := newEnv(t, "e2e-test-ignored", watchOptions{tested: true, testedChart: "failtested", ignoreTestFailures: true})
	strict.apply("bulky-t", "apiVersion: test.helmapp.io/v1\nkind: Bulky\nmetadata:\n  name: t\nspec: {}\n")
	ignored.apply("bulky-t", "apiVersion: test.helmapp.io/v1\nkind: Bulky\nmetadata:\n  name: t\nspec:\n  hookKind: Job\n")

	for _, tc := range []struct {
		e         *env
		wantReady metav1.ConditionStatus
		want      []string
	}{
		{strict, metav1.ConditionFalse, []string{"Test hook t-test of release t revision 1 failed: pod t-test failed",
			"(pod t-test Failed: container check terminated with reason Error, exit code 1)"}},
		{ignored, metav1.ConditionTrue, []string{"Test hook t-test of release t revision 1 failed: job t-test failed: BackoffLimitExceeded",
			"(pod t-test-", " Failed: container check terminated with reason Error, exit code 1)"}},
	} {
		e := tc.e
		var n *nginx
		var run map[string]any
		var raw []byte
		e.eventually("t", fmt.Sprintf("bulky/t TestSuccess=False TestFailed and Ready=%s", tc.wantReady), func(ctx context.Context) (bool, string) {
			u, err := suite.dyn.Resource(testedGVR).Namespace(e.ns).Get(ctx, "t", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			n = &nginx{}
			if err := fromUnstructured(u, n); err != nil {
				return false, err.Error()
			}
			run, _, _ = unstructured.NestedMap(u.Object, "status", "lastTestRun")
			raw, _ = json.Marshal(u.Object["status"])
			c := n.cond("TestSuccess")
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "TestFailed" && n.is(typeReady, tc.wantReady),
				fmt.Sprintf("%s; lastTestRun %v", n, run)
		})
		msg := n.cond("TestSuccess").Message
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				e.t.Errorf("TestSuccess message %q does not say %q", msg, want)
			}
		}
		if tc.wantReady == metav1.ConditionFalse {
			if r := n.cond(typeReady); r.Reason != "TestFailed" {
				e.t.Errorf("Ready=False with reason %s, want TestFailed", r.Reason)
			}
		}
		hooks, _ := run["hooks"].([]any)
		if len(hooks) != 1 {
			e.fatalf("lastTestRun %v: want the one test hook", run)
		}
		h := hooks[0].(map[string]any)
		if h["name"] != "t-test" || h["phase"] != "Failed" || h["startedAt"] == nil || h["completedAt"] == nil || run["revision"] != int64(1) {
			e.t.Errorf("lastTestRun %v: want revision 1, hook t-test Failed with its times", run)
		}
		if strings.Contains(string(raw), "the last lines of the container's log") {
			e.t.Errorf("the status holds the test pod's termination message (its log): %s", raw)
		}
		e.waitEvent("t", "TestFailed")
		e.checkHistory("t", 1, n)
	}
}
