//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// driftStatus is status.drift as a user reads it.
type driftStatus struct {
	DetectedAt metav1.Time `json:"detectedAt"`
	Corrected  bool        `json:"corrected"`
	Objects    []struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Fields []struct {
			Path         string       `json:"path"`
			Manager      string       `json:"manager"`
			Operation    string       `json:"operation"`
			Subresource  string       `json:"subresource"`
			Time         *metav1.Time `json:"time"`
			TimeObserved bool         `json:"timeObserved"`
		} `json:"fields"`
	} `json:"objects"`
}

// driftField is one field of status.drift, with its object.
type driftField struct {
	kind, name, path, manager, operation, subresource string
	time                                              *metav1.Time
	observed                                          bool
}

// drift reads status.drift of nginx/name and the whole status as JSON.
func (e *env) drift(ctx context.Context, name string) ([]driftField, string, error) {
	u, err := suite.dyn.Resource(nginxGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	all, _ := json.Marshal(u.Object["status"])
	st, _ := u.Object["status"].(map[string]any)
	b, _ := json.Marshal(st["drift"])
	var d driftStatus
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, "", err
	}
	var out []driftField
	for _, o := range d.Objects {
		for _, f := range o.Fields {
			out = append(out, driftField{kind: o.Kind, name: o.Name, path: f.Path, manager: f.Manager, operation: f.Operation,
				subresource: f.Subresource, time: f.Time, observed: f.TimeObserved})
		}
	}
	return out, string(all), nil
}

// waitDriftField waits until status.drift of nginx/cr names path of
// kind/name, and returns that field.
func (e *env) waitDriftField(cr, kind, name, path string) driftField {
	e.t.Helper()
	var found driftField
	e.eventually(cr, "status.drift to name "+kind+" "+name+" "+path, func(ctx context.Context) (bool, string) {
		fields, all, err := e.drift(ctx, cr)
		if err != nil {
			return false, err.Error()
		}
		for _, f := range fields {
			if f.kind == kind && f.name == name && f.path == path {
				found = f
				return true, ""
			}
		}
		return false, all
	})
	return found
}

// driftEvents are the notes of the events of reason about nginx/name.
func (e *env) driftEvents(ctx context.Context, name, reason string) ([]string, error) {
	list, err := suite.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == "Nginx" && ev.InvolvedObject.Name == name && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out, nil
}

// waitDriftEvent waits for an event of reason about nginx/name whose note
// holds every one of want, and returns it.
func (e *env) waitDriftEvent(name, reason string, want ...string) string {
	e.t.Helper()
	var found string
	e.eventually(name, "a "+reason+" event saying "+strings.Join(want, ", "), func(ctx context.Context) (bool, string) {
		notes, err := e.driftEvents(ctx, name, reason)
		if err != nil {
			return false, err.Error()
		}
	notes:
		for _, n := range notes {
			for _, w := range want {
				if !strings.Contains(n, w) {
					continue notes
				}
			}
			found = n
			return true, ""
		}
		return false, fmt.Sprintf("%q", notes)
	})
	return found
}

// within checks that a status time, to the second, is within 2 s of at.
func within(t *testing.T, what string, got *metav1.Time, at time.Time) {
	t.Helper()
	if got == nil || got.Time.Before(at.Truncate(time.Second).Add(-time.Second)) || got.Time.After(at.Add(2*time.Second)) {
		t.Errorf("%s: time %v, want within 2 s of %s", what, got, at.Format(time.RFC3339Nano))
	}
}

// replicas reads the replicas of Deployment web.
func (e *env) replicas(ctx context.Context) (int32, error) {
	d, err := e.deployment(ctx, "web")
	if err != nil {
		return 0, err
	}
	return *d.Spec.Replicas, nil
}

// The drift acceptance, with the real kubectl: `kubectl scale` is named in
// Drifted, status.drift and the DriftCorrected event (path, manager,
// subresource, a time within 2 s of the scale) and corrected; `kubectl
// patch --field-manager=alice` of a ConfigMap's data names alice and the
// path, and its value shows nowhere: not in the status, the events or the
// operator's log.
func TestDriftByKubectlNamesWhoChangedWhat(t *testing.T) {
	e := newEnv(t, "e2e-drift", watchOptions{})
	e.applyNginx("web", "  replicaCount: 2\n")
	e.waitCondition("web", typeReady)
	ctx := context.Background()

	scaled := time.Now()
	e.kubectl("scale", "deployment/web", "--replicas=5")
	f := e.waitDriftField("web", "Deployment", "web", "/spec/replicas")
	if f.manager != "kubectl" || f.subresource != "scale" || f.operation != "Update" {
		t.Errorf("status.drift names %+v, want kubectl's Update through the scale subresource", f)
	}
	within(t, "/spec/replicas", f.time, scaled)
	n := e.waitNginx("web", "Drifted=False DriftCorrected", func(n *nginx) bool {
		c := n.cond("Drifted")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "DriftCorrected"
	})
	says := "Deployment web: /spec/replicas changed by kubectl (Update, scale)"
	if msg := n.cond("Drifted").Message; !strings.Contains(msg, says) {
		t.Errorf("Drifted says %q, want %q", msg, says)
	}
	ev := e.waitDriftEvent("web", "DriftCorrected", says)
	t.Logf("Drifted: %s\nDriftCorrected event: %s", n.cond("Drifted").Message, ev)
	e.eventually("web", "the replicas restored to 2", func(ctx context.Context) (bool, string) {
		r, err := e.replicas(ctx)
		return err == nil && r == 2, fmt.Sprintf("replicas %d %v", r, err)
	})
	t.Logf("kubectl describe nginx web, after the scale:\n%s", e.kubectl("describe", "nginx", "web"))

	const value = "page-by-alice-5d1c"
	patched := time.Now()
	e.kubectl("patch", "configmap", "web", "--field-manager=alice", "--type=merge", "-p", `{"data":{"index.html":"`+value+`"}}`)
	f = e.waitDriftField("web", "ConfigMap", "web", "/data/index.html")
	if f.manager != "alice" || f.operation != "Update" || f.subresource != "" || f.observed {
		t.Errorf("status.drift names %+v, want alice's Update with managedFields' time", f)
	}
	within(t, "/data/index.html", f.time, patched)
	e.waitDriftEvent("web", "DriftCorrected", "ConfigMap web: /data/index.html changed by alice (Update) at ")

	_, status, err := e.drift(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	events, err := suite.kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := json.Marshal(events)
	log, err := os.ReadFile(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"the status": status, "the events": string(evs), "the operator's log": string(log)} {
		if strings.Contains(text, value) {
			t.Errorf("alice's value shows in %s", what)
		}
	}
}

// With the ignore rule {paths: [/spec/replicas], manager: kubectl},
// `kubectl scale` is neither corrected nor reported: no event, no Drifted,
// the replicas stay 5. The operator did look: it read the Deployment once
// more, past its cache, to see who changed it. A change to the ConfigMap
// by alice afterwards, which the rule does not cover, is corrected and
// named: the re-apply that saw the scale had ended by then.
func TestDriftIgnoreRuleLeavesKubectlScaleAlone(t *testing.T) {
	e := newEnv(t, "e2e-drift-ignore", watchOptions{drift: map[string]any{
		"ignore": []any{map[string]any{"paths": []any{"/spec/replicas"}, "manager": "kubectl"}}}})
	e.applyNginx("web", "  replicaCount: 2\n")
	e.waitCondition("web", typeReady)
	ctx := context.Background()

	scaled := time.Now()
	e.kubectl("scale", "deployment/web", "--replicas=5")
	e.eventually("web", "the operator to read Deployment web past its cache after the scale", func(context.Context) (bool, string) {
		return operatorReadAfter(t, e.ns, "/apis/apps/v1/namespaces/"+e.ns+"/deployments/web", scaled), "no read yet"
	})
	n := e.mustNginx("web")
	if c := n.cond("Drifted"); c != nil {
		t.Errorf("Drifted %s %s: %s, want none for an ignored scale", c.Status, c.Reason, c.Message)
	}

	e.kubectl("patch", "configmap", "web", "--field-manager=alice", "--type=merge", "-p", `{"data":{"index.html":"changed"}}`)
	ev := e.waitDriftEvent("web", "DriftCorrected", "ConfigMap web: /data/index.html changed by alice")
	notes, err := e.driftEvents(ctx, "web", "DriftCorrected")
	if err != nil {
		t.Fatal(err)
	}
	for _, note := range notes {
		if strings.Contains(note, "Deployment") || strings.Contains(note, "replicas") {
			t.Errorf("a DriftCorrected event names the ignored scale: %q", note)
		}
	}
	if r, err := e.replicas(ctx); err != nil || r != 5 {
		t.Errorf("replicas %d (%v), want the ignored scale's 5", r, err)
	}
	fields, _, err := e.drift(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f.kind == "Deployment" {
			t.Errorf("status.drift names the ignored scale: %+v", f)
		}
	}
	t.Logf("DriftCorrected event after the ignored scale: %s", ev)
}

// operatorReadAfter tells whether the audit log holds a get of uri after at
// by a client other than kubectl (the operator: the only other reader of
// the test's namespace that gets single objects).
func operatorReadAfter(t *testing.T, ns, uri string, at time.Time) bool {
	t.Helper()
	f, err := os.Open(suite.cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), uri) {
			continue
		}
		var ev struct {
			Verb           string    `json:"verb"`
			RequestURI     string    `json:"requestURI"`
			UserAgent      string    `json:"userAgent"`
			StageTimestamp time.Time `json:"stageTimestamp"`
			ObjectRef      struct {
				Namespace string `json:"namespace"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		if ev.Verb == "get" && ev.RequestURI == uri && ev.ObjectRef.Namespace == ns &&
			!strings.HasPrefix(ev.UserAgent, "kubectl") && ev.StageTimestamp.After(at) {
			return true
		}
	}
	return false
}
