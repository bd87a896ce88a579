package reconciler_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// "No progress is possible until the resource's spec changes": a chart that
// cannot render with the values is not retried, and a spec that it renders
// with installs, with no other nudge.
func TestRenderStallEndsWhenTheSpecChanges(t *testing.T) {
	e := newEnv(t)
	e.create(gadgetGVK, "g", map[string]any{"fail": true})
	u := e.wait(gadgetGVK, "g", status.TypeStalled, metav1.ConditionTrue, status.ReasonChartRenderError)
	if msg := conditionMessage(u, status.TypeReconciling); msg != "No progress is possible until the resource's spec changes" {
		t.Errorf("Reconciling's message %q", msg)
	}
	e.patchSpec(gadgetGVK, "g", map[string]any{"fail": false})
	u = e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	expect(t, u, "Stalled=False/NotStalled", "Deployed=True/InstallSuccessful")
}
