package reconciler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Redact what is secret, not everything (issue 42): an admission refusal
// that quotes the page the chart rendered from a storage class name the
// user wrote in the spec and a password read from a Secret shows the class
// name in the status and the event, and the password nowhere.
func TestRedactionShowsTheSpecAndHidesTheSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.policy("quote-page", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "false", MessageExpression: "'refusing page: ' + object.data['index.html'].replace('\\n', ' ')"})
	e.waitDenied("ConfigMap creates", func(ctx context.Context) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns}, Data: map[string]string{"index.html": "x"}}
		return e.c.Create(ctx, cm, client.DryRunAll)
	})

	const class = "fast-ssd-class"
	pw := "pw-" + strings.Repeat("Lq8cT4vZn2", 3)
	e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: " + pw + "\n"})
	cr := e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1), "page": map[string]any{"body": class}},
		map[string]any{"kind": "Secret", "name": "db"})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	msg := conditionMessage(u, status.TypeReleaseFailed)
	if !strings.Contains(msg, class) || !strings.Contains(msg, status.RedactedMark) {
		t.Errorf("ReleaseFailed should show the spec's %q and hide the Secret's value; got %q", class, msg)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventInstallFailed)
	raw, _ := json.Marshal(e.get(tu.NginxGVK, "web").Object["status"])
	var notes []string
	for _, ev := range e.events(cr) {
		notes = append(notes, ev.Reason+": "+ev.Message)
	}
	for _, where := range []struct{ name, text string }{{"the status", string(raw)}, {"the events", strings.Join(notes, "\n")}, {"the log", e.logs.String()}} {
		if w := leakedPiece(where.text, pw); w != "" {
			t.Errorf("%q of the password is in %s:\n%s", w, where.name, grepLines(where.text, w))
		}
		if where.name != "the log" && !strings.Contains(where.text, class) {
			t.Errorf("%s does not show the spec's %q:\n%s", where.name, class, where.text)
		}
	}
}
