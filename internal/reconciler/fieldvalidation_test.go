package reconciler_test

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestUnknownFieldInChart installs a chart whose ConfigMap has a field its
// kind does not have. Helm validates the manifest with the operator's
// shared validator (internal/operator/validator.go, openapicache.go), which
// leaves fields to the API server when it validates them itself, as this
// one does: the API server drops the field and warns. The user sees that
// warning, naming the object and the field, as an APIWarning event of the
// install, and the release deployed, exactly as with Helm's own validator
// (issue 27: sharing the validator must not lose what a user sees).
func TestUnknownFieldInChart(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "misfielded"))
	if err != nil {
		t.Fatal(err)
	}
	e.launch(tu.WatchesFile(t, `
- {group: test.helmapp.io, version: v1, kind: Widget, chart: `+chart+`}
`), nil)

	u := e.create(widgetGVK, "cm", map[string]any{})
	ev := e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventAPIWarning)
	for _, want := range []string{"ConfigMap cm", `unknown field "dataa"`} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("the APIWarning event %q does not say %q", ev.Message, want)
		}
	}
	if ev.Action != status.ActionInstall {
		t.Errorf("the APIWarning event's action is %q, want %s", ev.Action, status.ActionInstall)
	}
	u = e.wait(widgetGVK, "cm", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	expect(t, u, "Deployed=True/InstallSuccessful")
}
