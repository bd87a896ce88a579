package reconciler_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A test run is an action like the others: while the tests of revision 1
// wait on a test Pod that never completes (no kubelet runs it here), a new
// generation preempts the run at once instead of waiting out the 10 minute
// test timeout; the status and an ActionSuperseded event say so; the new
// generation is upgraded and its tests pass. The run is counted in the Helm
// action metrics as action "test".
func TestNewGenerationPreemptsAHungTestRun(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testedWatches(t, "timeout: 10m, test: {enable: true}"))
	seen := e.recordStatuses(bulkyGVK, "t")
	cr := e.create(bulkyGVK, "t", map[string]any{"hang": true})
	e.waitHungTestRun("t")

	e.patchSpec(bulkyGVK, "t", map[string]any{"hang": false})
	u := e.waitSoon(bulkyGVK, "t", "generation 2 upgraded and tested", func(u *unstructured.Unstructured) bool {
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return og == 2 && tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	})
	expect(t, u, "TestSuccess=True/TestSucceeded")
	if rev := nested(u, "status", "lastTestRun", "revision"); rev != int64(2) {
		t.Errorf("lastTestRun.revision = %v, want 2", rev)
	}
	consistentHistory(t, e.ns, "t", u)

	story := "The test run of release t revision 1 for generation 1 was superseded by generation 2 while it waited on test hook t-test-hang (Pod)"
	told := false
	for _, s := range seen() {
		if strings.Contains(conditionMessage(s, status.TypeTestSuccess), story) {
			told = true
		}
	}
	if !told {
		t.Errorf("no status said TestSuccess %q", story)
	}
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventActionSuperseded)
	for _, want := range []string{"Generation 2", "generation 1", "hook"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("ActionSuperseded event %q lacks %q", ev.Message, want)
		}
	}

	// The preempted run is a failed "test" action of the Bulky kind (other
	// tests of this package run Bulky tests too: this says test runs are
	// counted at all).
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var failed uint64
	for _, f := range families {
		if f.GetName() != metrics.HelmActionDuration {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["kind"] == "Bulky" && l["action"] == rel.ActionTest && l["outcome"] == metrics.OutcomeFailure {
				failed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if failed == 0 {
		t.Errorf("no failed %q action of kind Bulky in %s", rel.ActionTest, metrics.HelmActionDuration)
	}
}
