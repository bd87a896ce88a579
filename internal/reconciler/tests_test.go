package reconciler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// testedWatches watches the Bulky kind with the tested chart (two ConfigMap
// test hooks) and the test field test.
func testedWatches(t *testing.T, test string) string {
	t.Helper()
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "tested"))
	if err != nil {
		t.Fatal(err)
	}
	return bulkyWatches(t, chart, test)
}

// refuseTests makes the API server refuse the test hook the chart labels
// helmapp.io/refuse-test (values refuse: true), and waits until it does;
// the returned function lifts the policy and waits until it is lifted.
func (e *env) refuseTests() func() {
	e.t.Helper()
	remove := e.policy("refuse-tests", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "!has(object.metadata.labels) || !('helmapp.io/refuse-test' in object.metadata.labels)",
			Message: "refused test configmap"})
	probe := func(ctx context.Context) error {
		return e.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns,
			Labels: map[string]string{"helmapp.io/refuse-test": "true"}}}, client.DryRunAll)
	}
	e.waitDenied("labelled test ConfigMaps", probe)
	return func() {
		remove()
		tu.Eventually(e.t, 30*time.Second, "the policy to be lifted", func() (bool, string) {
			err := probe(context.Background())
			return err == nil, "dry run still gives " + errString(err)
		})
	}
}

// waitHungTestRun waits until the test run of the Bulky name (the tested
// chart with hang: true) waits on its test Pod name-test-hang, which never
// completes (no kubelet runs it here), and the status says tests are
// awaited.
func (e *env) waitHungTestRun(name string) {
	e.t.Helper()
	pod := name + "-test-hang"
	tu.Eventually(e.t, time.Minute, "the test run to wait on the test Pod "+pod, func() (bool, string) {
		err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: pod}, &corev1.Pod{})
		u := e.get(bulkyGVK, name)
		c := tu.Condition(u, status.TypeTestSuccess)
		return err == nil && c != nil && c.Reason == status.ReasonAwaitingTests, fmt.Sprintf("pod: %v; %s", err, tu.Describe(u))
	})
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// hooksOf returns "name=phase" for each hook of status.lastTestRun, and
// checks the run and each hook that ran carry their times.
func hooksOf(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	run, _, _ := unstructured.NestedMap(u.Object, "status", "lastTestRun")
	if run["startedAt"] == nil || run["completedAt"] == nil {
		t.Errorf("lastTestRun %v lacks its start or completion time", run)
	}
	var out []string
	hooks, _, _ := unstructured.NestedSlice(u.Object, "status", "lastTestRun", "hooks")
	for _, h := range hooks {
		m := h.(map[string]any)
		out = append(out, m["name"].(string)+"="+m["phase"].(string))
		if m["startedAt"] == nil || m["completedAt"] == nil {
			t.Errorf("test hook %v lacks its start or completion time", m)
		}
	}
	return out
}

// With test.enable the chart's test hooks run after the install and after
// each upgrade: TestSuccess says how they went, and Ready follows it. A
// hook the API server refuses fails the tests (TestFailed naming the hook
// and why, Ready False) without failing the release: the upgraded revision
// stays deployed. A new value of helmapp.io/test runs them again.
func TestChartTestsRunAfterInstallAndUpgrade(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testedWatches(t, "test: {enable: true}"))
	cr := e.create(bulkyGVK, "t", map[string]any{})
	u := e.wait(bulkyGVK, "t", status.TypeTestSuccess, metav1.ConditionTrue, status.ReasonTestSucceeded)
	expect(t, u, "Ready=True/InstallSuccessful", "Deployed=True/InstallSuccessful")
	if rev := nested(u, "status", "lastTestRun", "revision"); rev != int64(1) {
		t.Errorf("lastTestRun.revision = %v, want 1", rev)
	}
	if got := strings.Join(hooksOf(t, u), " "); got != "t-test-a=Succeeded t-test-b=Succeeded" {
		t.Errorf("lastTestRun hooks %s", got)
	}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "t-test-b"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the test hook t-test-b did not run: %v", err)
	}
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventTestSucceeded)

	lift := e.refuseTests()
	e.patchSpec(bulkyGVK, "t", map[string]any{"refuse": true})
	u = e.wait(bulkyGVK, "t", status.TypeReady, metav1.ConditionFalse, status.ReasonTestFailed)
	expect(t, u, "TestSuccess=False/TestFailed", "Deployed=True/UpgradeSuccessful", "Stalled=False/NotStalled")
	msg := conditionMessage(u, status.TypeTestSuccess)
	for _, want := range []string{"Test hook t-test-b of release t revision 2 failed", "refused test configmap"} {
		if !strings.Contains(msg, want) {
			t.Errorf("TestSuccess message %q does not say %q", msg, want)
		}
	}
	if got := strings.Join(hooksOf(t, u), " "); got != "t-test-a=Succeeded t-test-b=Failed" {
		t.Errorf("lastTestRun hooks %s", got)
	}
	if rev := nested(u, "status", "lastTestRun", "revision"); rev != int64(2) {
		t.Errorf("lastTestRun.revision = %v, want 2", rev)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventTestFailed)
	h := history(t, e.ns, "t")
	if len(h) != 2 || h[1].Info.Status.String() != "deployed" || h[0].Info.Status.String() != "superseded" {
		t.Errorf("history after the failed tests: %v", h)
	}

	// Once the hook is allowed, a new value of the annotation runs the tests
	// of the same revision again.
	lift()
	e.annotate(bulkyGVK, "t", map[string]any{rel.AnnotationTest: "again"})
	u = e.wait(bulkyGVK, "t", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	expect(t, u, "TestSuccess=True/TestSucceeded")
	if v := nested(u, "status", "lastHandledTest"); v != "again" {
		t.Errorf("lastHandledTest = %v, want again", v)
	}
	if got := strings.Join(hooksOf(t, u), " "); got != "t-test-a=Succeeded t-test-b=Succeeded" {
		t.Errorf("lastTestRun hooks %s", got)
	}
	if h := history(t, e.ns, "t"); len(h) != 2 {
		t.Errorf("the test run wrote a revision: %d revisions", len(h))
	}
}

// With test.ignoreFailures a failed test is reported in TestSuccess and
// does not make the resource not Ready.
func TestChartTestFailuresIgnored(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.refuseTests()
	e.launch(testedWatches(t, "test: {enable: true, ignoreFailures: true, timeout: 30s}"), nil)
	e.create(bulkyGVK, "t", map[string]any{"refuse": true})
	u := e.wait(bulkyGVK, "t", status.TypeTestSuccess, metav1.ConditionFalse, status.ReasonTestFailed)
	expect(t, u, "Ready=True/InstallSuccessful")
	if ign := nested(u, "status", "lastTestRun", "ignoreFailures"); ign != true {
		t.Errorf("lastTestRun.ignoreFailures = %v", ign)
	}
}

// Without test.enable no test hook runs and the status says nothing of tests.
func TestChartTestsOffByDefault(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testedWatches(t, ""))
	e.create(bulkyGVK, "t", map[string]any{})
	u := e.wait(bulkyGVK, "t", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if c := tu.Condition(u, status.TypeTestSuccess); c != nil || nested(u, "status", "lastTestRun") != nil {
		t.Errorf("tests off, yet TestSuccess %v and lastTestRun %v", c, nested(u, "status", "lastTestRun"))
	}
	err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "t-test-a"}, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the test hook t-test-a ran with tests off: %v", err)
	}
}

// The event of a step is emitted when the step happens: while the tests of
// revision 1 wait on a test Pod that never completes, the InstallSucceeded
// event is already there, not once the test run ended. Each step's event is
// emitted once: after the new generation preempted the run and was
// upgraded and tested, there is one InstallSucceeded, one UpgradeSucceeded
// and one TestSucceeded event.
func TestEventsComeWhenTheirStepHappens(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testedWatches(t, "timeout: 10m, test: {enable: true}"))
	cr := e.create(bulkyGVK, "t", map[string]any{"hang": true})
	e.waitHungTestRun("t")
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventInstallSucceeded)
	if !strings.Contains(ev.Message, "revision 1") {
		t.Errorf("InstallSucceeded event %q does not name revision 1", ev.Message)
	}
	if c := tu.Condition(e.get(bulkyGVK, "t"), status.TypeTestSuccess); c == nil || c.Reason != status.ReasonAwaitingTests {
		t.Fatalf("the test run ended before the event was seen: TestSuccess %v", c)
	}

	e.patchSpec(bulkyGVK, "t", map[string]any{"hang": false})
	e.waitSoon(bulkyGVK, "t", "generation 2 upgraded and tested", func(u *unstructured.Unstructured) bool {
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return og == 2 && tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful) &&
			tu.ConditionIs(u, status.TypeTestSuccess, metav1.ConditionTrue, status.ReasonTestSucceeded)
	})
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventTestSucceeded)
	for _, reason := range []string{reconciler.EventInstallSucceeded, reconciler.EventUpgradeSucceeded, reconciler.EventTestSucceeded} {
		if n := e.countEvents(cr, reason); n != 1 {
			t.Errorf("%d %s events, want 1", n, reason)
		}
	}
}
