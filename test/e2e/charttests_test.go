//go:build e2e

package e2e

import (
	"context"
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
