package reconciler_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A chart with randAlphaNum in a template (testdata/charts/random) renders
// differently on each run with the same values. The operator says so (a
// NondeterministicRender Warning event and Deployed's message, naming the
// template) and makes one revision per real change: left idle for ten
// periodic reconciles it makes none, and a spec change makes exactly one.
//
// The acceptance is five minutes idle at a 30 s period: ten
// periodic reconciles. A period of 1 s gives the same ten reconciles, each
// the same pass over the same state (the period only spaces them), in ten
// seconds.
func TestNondeterministicChartMakesOneRevisionPerChange(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "random"))
	if err != nil {
		t.Fatal(err)
	}
	e.launch(tu.WatchesFile(t, `
- {group: test.helmapp.io, version: v1, kind: Widget, chart: `+chart+`}
`), []func(*operator.Config){func(c *operator.Config) { c.ReconcilePeriod = time.Second }})

	u := e.create(widgetGVK, "web", map[string]any{})
	e.wait(widgetGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	ev := e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventNondeterministicRender)
	if !strings.Contains(ev.Message, "random/templates/secret.yaml") || strings.Contains(ev.Message, "configmap.yaml") {
		t.Errorf("the NondeterministicRender event %q does not name the Secret's template alone", ev.Message)
	}

	e.waitReconciles(e.gets.Load(), 10, "ten periodic reconciles")
	u = e.get(widgetGVK, "web")
	if h := history(t, e.ns, "web"); len(h) != 1 {
		t.Errorf("%d revisions after ten periodic reconciles, want 1", len(h))
	}
	if msg := conditionMessage(u, status.TypeDeployed); !strings.Contains(msg, "renders differently on each run") ||
		!strings.Contains(msg, "random/templates/secret.yaml") {
		t.Errorf("Deployed's message %q does not say the chart renders differently", msg)
	}

	e.patchSpec(widgetGVK, "web", map[string]any{"greeting": "hi"})
	u = e.waitStatus(widgetGVK, "web", "the upgrade to revision 2", revisionIs(2, status.ReasonUpgradeSuccessful))
	e.waitReconciles(e.gets.Load(), 5, "five periodic reconciles")
	if h := history(t, e.ns, "web"); len(h) != 2 {
		t.Errorf("%d revisions after one spec change, want 2", len(h))
	}
	e.wantRevisionCauses(u, 2, status.ActionUpgrade, "deployed", true, "SpecChanged: generation 1→2, values keys greeting")
}
