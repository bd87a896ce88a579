package reconciler_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// leakWindow is the length of a run of a value's characters that counts as
// the value in part.
const leakWindow = 8

// leakedPiece returns the first run of leakWindow characters of v found in
// s, "" for none; a multi-line value is looked for line by line, as its
// white space may be folded or escaped.
func leakedPiece(s, v string) string {
	for _, piece := range strings.Fields(v) {
		for i := 0; i+leakWindow <= len(piece); i++ {
			if w := piece[i : i+leakWindow]; strings.Contains(s, w) {
				return w
			}
		}
	}
	return ""
}

// A long secret and a PEM key in a resource's values at a path the watch
// lists as sensitive (sensitiveValues; since issue 42 nothing else of the
// spec is hidden), quoted by the API
// server's denial of a failed install whose message the remediation's remedy
// makes the operator shorten, the secret across the cut and the key
// flattened by the denial, then quoted raw, newlines and all, by the
// chart's `fail`: neither appears, in part or in full, in the status, the
// events or the operator's log at any level (issue 38).
func TestNoValueInStatusEventsOrLogsAcrossTheCut(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	debug := func(c *operator.Config) {
		l := zap.New(zap.WriteTo(e.logs), zap.Level(zapcore.Level(-10))) // every V level
		c.Logger = &l
	}
	e.launch(testWatches(t, "installRemediation: uninstall", "sensitiveValues: [data]"), []func(*operator.Config){slowRetries, debug})

	key := ecKey(t)
	secret := "tok-" + strings.Repeat("Zq7vN2xKp9", 140) // 1404 bytes: across every cut
	e.policy("quote-data", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "false",
			MessageExpression: "'refusing data: key ' + object.data['key'].replace('\\n', ' ') + ' token ' + object.data['token']"})
	e.waitDenied("ConfigMap creates", func(ctx context.Context) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns}, Data: map[string]string{"key": "k", "token": "t"}}
		return e.c.Create(ctx, cm, client.DryRunAll)
	})

	cr := e.create(gadgetGVK, "leaky", map[string]any{"data": map[string]any{"key": key, "token": secret}})
	u := e.wait(gadgetGVK, "leaky", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	msg := conditionMessage(u, status.TypeReleaseFailed)
	if !strings.Contains(msg, "refusing data: key "+status.RedactedMark) || !strings.HasSuffix(msg, "; the failed install was uninstalled; the next attempt installs afresh") ||
		len(msg) > status.MaxMessageLength {
		t.Errorf("ReleaseFailed should quote the denial, redacted and shortened, and end with the remedy; got %q", msg)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventInstallFailed)
	e.check(cr, "refusing data", key, secret)

	// The chart's own `fail` quotes the key raw, newlines and all.
	e.patchSpec(gadgetGVK, "leaky", map[string]any{"failQuoting": "key"})
	u = e.wait(gadgetGVK, "leaky", status.TypeStalled, metav1.ConditionTrue, status.ReasonChartRenderError)
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, "the chart refuses its key: "+status.RedactedMark) {
		t.Errorf("Stalled should quote the chart's message, redacted; got %q", msg)
	}
	e.check(cr, "the chart refuses its key", key, secret)
}

// ecKey returns a fresh EC private key in PEM.
func ecKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// check asserts that no value appears in the status, the events or the log,
// which all show the failure (shown): the check is not vacuous.
func (e *env) check(cr *unstructured.Unstructured, shown string, values ...string) {
	e.t.Helper()
	u := e.get(gadgetGVK, cr.GetName())
	raw, _ := json.Marshal(u.Object["status"])
	var notes []string
	for _, ev := range e.events(cr) {
		notes = append(notes, ev.Reason+": "+ev.Message)
	}
	logs := e.logs.String()
	for _, where := range []struct{ name, text string }{
		{"the status", string(raw)},
		{"the events", strings.Join(notes, "\n")},
		{"the operator's log", logs},
	} {
		for i, v := range values {
			if w := leakedPiece(where.text, v); w != "" {
				e.t.Errorf("%q of value %d is in %s:\n%s", w, i, where.name, grepLines(where.text, w))
			}
		}
		if !strings.Contains(where.text, shown) {
			e.t.Errorf("%s does not show the failure (%q) at all; the check proves nothing:\n%s", where.name, shown, where.text)
		}
	}
	if !strings.Contains(logs, `"level":"debug"`) {
		e.t.Errorf("the log has no debug line; its check proves nothing for the levels below info")
	}
}
