package status

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The bounds of the paths outside this package that TestNoValueAcrossAnyCut
// follows (a test of package status cannot import them).
const (
	eventNote        = 1000 // internal/reconciler maxEventNote
	objectMessage    = 300  // internal/readiness MaxObjectMessageLength
	namedMessage     = (MaxMessageLength - 64) / 3
	warningKept      = 500 // internal/readiness maxWarningLength
	leakWindow       = 8   // a run of this many characters of a value is a leak
	secretLength     = 1400
	apiServerWarning = 256 // the API server cuts a warning to so many runes
)

// newPEM returns a fresh EC private key in PEM, a multi-line value.
func newPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// newSecret returns a long single-line value, no run of which is a word.
func newSecret() string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
	b := make([]byte, secretLength)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "tok-" + string(b)
}

// leaks returns the first run of leakWindow characters of a value found in
// out, "" when there is none. A multi-line value is looked for piece by
// piece (its white space may have been folded or escaped), each piece of
// leakWindow characters or more.
func leaks(out string, values ...string) string {
	for _, v := range values {
		for _, piece := range strings.Fields(v) {
			for i := 0; i+leakWindow <= len(piece); i++ {
				if w := piece[i : i+leakWindow]; strings.Contains(out, w) {
					return w
				}
			}
		}
	}
	return ""
}

// forms are the ways an error quotes a value: as it is, its white space
// folded (a policy's message, an error one-lined), JSON- or Go-quoted (its
// newlines escaped), and quoted again by an error that quotes an error.
var forms = []struct {
	name  string
	quote func(string) string
}{
	{"raw", func(v string) string { return v }},
	{"folded", func(v string) string { return strings.Join(strings.Fields(v), " ") }},
	{"json", func(v string) string { b, _ := json.Marshal(v); return string(b) }},
	{"quoted twice", func(v string) string { return fmt.Sprintf("%q", fmt.Sprintf("%q", v)) }},
}

// paths build, from err (an error of Helm or the API server that quotes the
// values), what a user reads on each path the operator takes a message
// along, shortened as that path shortens it: status (its conditions,
// failedRelease, resources), events and log lines. Each mirrors its code.
var paths = []struct {
	name string
	show func(r Redactor, err string) []string
}{
	{"failure with a remedy: conditions, failedRelease (release.Error, reconciler.failed, Compute)", func(r Redactor, err string) []string {
		msg := "Upgrade of release web to revision 2 failed: " + Foreign(err) + Tail("; rolled back to revision 1")
		return fromStatus(failureStatus(r.Safe(msg, MaxMessageLength)))
	}},
	{"failure with a remedy: its event", func(r Redactor, err string) []string {
		msg := "Upgrade of release web to revision 2 failed: " + Foreign(err) + Tail("; rolled back to revision 1")
		return []string{Bound(r.Safe(msg, MaxMessageLength), eventNote)}
	}},
	{"failure with a remedy: the writer's shortening of a status refused for its size", func(r Redactor, err string) []string {
		msg := "Upgrade of release web to revision 2 failed: " + Foreign(err) + Tail("; rolled back to revision 1")
		return fromStatus(shorten(failureStatus(r.Safe(msg, MaxMessageLength)), shortMessageLength))
	}},
	{"failure whose remedy failed, quoting the values too", func(r Redactor, err string) []string {
		msg := "Install of release web failed: " + Foreign("denied") +
			Tail("; uninstalling the failed install failed: "+Foreign(err))
		return fromStatus(failureStatus(r.Safe(msg, MaxMessageLength)))
	}},
	{"failure without a remedy, all of it foreign (release.AsFailure)", func(r Redactor, err string) []string {
		return fromStatus(failureStatus(r.Safe(Foreign(err), MaxMessageLength)))
	}},
	{"API warning: its event (readiness.Warnings, reconciler.warningEvents)", func(r Redactor, err string) []string {
		kept := Clip(strings.Join(strings.Fields(err), " "), warningKept)
		return []string{r.Safe("The API server warned on applying Deployment web: "+Foreign(kept), eventNote)}
	}},
	{"API warning cut by the API server: its event", func(r Redactor, err string) []string {
		kept := Clipped(string([]rune(err)[:min(apiServerWarning, len([]rune(err)))]))
		return []string{r.Safe("The API server warned on applying Deployment web: "+Foreign(kept), eventNote)}
	}},
	{"API warning as an object's cause: status.resources and ResourcesReady (readiness.Check, Summarize)", func(r Redactor, err string) []string {
		kept := Clip(strings.Join(strings.Fields(err), " "), warningKept)
		obj := r.Safe("Deployment generation is 2: "+Foreign("replicas 0/1"), objectMessage)
		obj = Bound(obj+"; "+r.Safe("API server warning on apply: "+Foreign(kept), objectMessage), objectMessage)
		return []string{obj, Bound("Deployment web: "+obj, namedMessage), Bound("Deployment web: "+obj, MaxMessageLength)}
	}},
	{"kstatus' message and a read's error: status.resources (readiness.objectResult)", func(r Redactor, err string) []string {
		return []string{r.Safe(Foreign(err), objectMessage), r.Safe("reading it failed: "+Foreign(err), objectMessage)}
	}},
	{"a test hook's failure: TestSuccess and its event (release.testFailure)", func(r Redactor, err string) []string {
		msg := "Test hook web-test of release web revision 1 failed: " + Foreign(err) + " (" + Foreign(err) + ")"
		s := Compute(Status{DeployedRelease: &DeployedRelease{Revision: 1}}, Outcome{Generation: 1, Now: metav1.Now(),
			DeployedKnown: true, Deployed: &DeployedRelease{Revision: 1}, TestsEnabled: true,
			Test: &TestRun{Revision: 1}, TestFailure: r.Safe(msg, MaxMessageLength)})
		return append(fromStatus(s), Bound(r.Safe(msg, eventNote), eventNote))
	}},
	{"Helm's description of a foreign revision: its event (reconciler.foreignEvent)", func(r Redactor, err string) []string {
		return []string{Bound(fmt.Sprintf("Release web revision 3 (deployed, Helm's description %q) was written by someone else", r.Redact(err)), eventNote)}
	}},
	{"log lines at every level (Redactor.Logger)", func(r Redactor, err string) []string {
		var lines []string
		log := r.Logger(funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: 9}))
		log.Error(errors.New(err), "Reconcile failed", "error", err)
		log.Info("Stalled", "error", errors.New(err))
		log.V(1).Info(fmt.Sprintf("warning: Upgrade %q failed: %s", "web", err)) // Helm's debug output
		log.WithValues("cause", err).WithName("helm").V(4).Info(err)
		return lines
	}},
}

// failureStatus is the status Compute makes of a failed upgrade whose message
// is msg.
func failureStatus(msg string) Status {
	return Compute(Status{}, Outcome{Generation: 1, Now: metav1.Now(), Action: ActionUpgrade,
		Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Revision: 2, Message: msg}})
}

// fromStatus is every message of s.
func fromStatus(s Status) []string {
	var out []string
	for _, c := range s.Conditions {
		out = append(out, c.Message)
	}
	if s.FailedRelease != nil {
		out = append(out, s.FailedRelease.Message)
	}
	if s.Resources != nil {
		for _, o := range s.Resources.NotReady {
			out = append(out, o.Message)
		}
	}
	return out
}

// A long secret placed across the cut of each path, and a multi-line PEM
// key before it, across the cut too or not, in each form an error quotes
// them in: no run of 8 characters of either reaches status, an event or a
// log line, on any path that builds a message. The values are redacted from
// the whole message before it is shortened (Safe), and in the forms the
// error or the flattening gave them (issue 38).
func TestNoValueAcrossAnyCut(t *testing.T) {
	key, secret := newPEM(t), newSecret()
	r := NewRedactor(map[string]any{"spec": map[string]any{"tls": map[string]any{"key": key}, "token": secret, "replicas": int64(2)}}, "web")
	filler := strings.Repeat("quota exceeded, ", 80)
	for _, f := range forms {
		// The secret first, across every cut; the key first, then padded so
		// that it lies across each cut in turn.
		layouts := map[string]string{"secret first": "token " + f.quote(secret) + " and key " + f.quote(key)}
		for pad := 0; pad <= 1000; pad += 100 {
			layouts[fmt.Sprintf("key after %d bytes", pad)] = filler[:pad] + "key " + f.quote(key) + " and token " + f.quote(secret)
		}
		for layout, values := range layouts {
			err := "admission webhook \"check.example.com\" denied the request: refusing " + values
			for _, p := range paths {
				outs := p.show(r, err)
				for _, out := range outs {
					if w := leaks(out, secret, key); w != "" {
						t.Errorf("%s; %s, %s: %q of a value is in\n%s", p.name, f.name, layout, w, out)
					}
				}
				// Not vacuous: the error itself is shown.
				if !strings.Contains(strings.Join(outs, "\n"), "denied the request: refusing") {
					t.Errorf("%s; %s, %s: the error is not shown: %q", p.name, f.name, layout, outs)
				}
			}
		}
	}
}

// One line of a multi-line value, quoted alone, is hidden too; the
// operator's own words around a redacted value are kept.
func TestSafeKeepsTheOperatorsWordsAndTheTail(t *testing.T) {
	key := newPEM(t)
	r := NewRedactor(map[string]any{"key": key, "on": true}, "web")
	line := strings.Split(key, "\n")[1]
	msg := `Upgrade of release web failed: set it to "true": ` + Foreign(`yaml: line 3: "`+line+`" is invalid; "true" quoted`+
		strings.Repeat(" padding", 200)) + Tail("; rolled back to revision 1")
	got := r.Safe(msg, MaxMessageLength)
	if strings.Contains(got, line[:leakWindow]) {
		t.Errorf("a line of the key is in %q", got)
	}
	if !strings.HasPrefix(got, `Upgrade of release web failed: set it to "true": yaml: line 3: "[redacted]" is invalid; "[redacted]" quoted`) ||
		!strings.HasSuffix(got, TruncationMark+"; rolled back to revision 1") || len(got) > MaxMessageLength {
		t.Errorf("Safe gave %q", got)
	}
}

// Bound, for the operator's own words, hides foreign text still marked
// (not redacted) whole rather than cut it: shortening before redaction
// cannot leak a value's beginning.
func TestBoundHidesUnredactedForeignText(t *testing.T) {
	secret := newSecret()
	got := Bound("Install failed: "+Foreign("denied "+secret)+Tail("; uninstalled"), 100)
	if got != "Install failed: "+RedactedMark+"; uninstalled" {
		t.Errorf("Bound gave %q", got)
	}
}

// The logger a reconcile runs with keeps the levels it is given, up to
// MaxLogLevel: nothing is redacted, or even formatted, for a level that is
// off, and client-go's dumps of whole objects (V(8)) are never logged.
func TestLoggerKeepsLevels(t *testing.T) {
	var lines []string
	for _, verbosity := range []int{0, 9} {
		lines = nil
		base := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: verbosity})
		log := NewRedactor(map[string]any{"token": "hunter2-s3cret"}).Logger(base)
		log.V(1).Info("debug hunter2-s3cret")
		log.V(8).Info("Response Body", "body", `{"spec":{"token":"hunter2-s3cret"}}`)
		log.Info("shown", "token", "hunter2-s3cret", "count", 3)
		want := 1
		if verbosity > 0 {
			want = 2
		}
		if len(lines) != want || strings.Contains(strings.Join(lines, "\n"), "hunter2") || !strings.Contains(lines[len(lines)-1], `"count"=3`) {
			t.Errorf("at verbosity %d logged %q", verbosity, lines)
		}
	}
	if l := NewRedactor(nil).Logger(logr.Discard()); l.Enabled() {
		t.Error("a discarding logger became enabled")
	}
}
