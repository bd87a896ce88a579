//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// discoveryLogLine is what the operator logs, once per process, of an API
// group whose discovery fails (internal/operator/discovery.go).
const discoveryLogLine = "API group discovery failed"

// TestUnavailableAPIServiceIsNotReadyAndTheRestGoesOn (issue 40): a chart
// that registers an aggregated API (test chart apiservice, kind Hooked: an
// APIService v1beta1.<namespace>.e2e.helmapp.io pointing at its Service,
// whose Deployment runs no replica) deploys, and the API server calls the
// APIService unavailable: the resource is Deployed=True and Ready=False
// APIServiceUnavailable, naming the APIService and the API server's reason,
// within 60 s. An unavailable aggregated API makes discovery partial for
// every client of the cluster; the operator uses what discovery returns:
// a new operator process, started while the group is broken, applies a
// spec change of another kind (an Nginx) in its usual time and upgrades the
// broken release itself, names the failing group once in its log, and
// through these and ten more reconciles (helmapp.io/retry) asks the API
// server nothing of that group, and reads discovery only at its start and
// per its capabilities' TTL (audit log).
// The APIService is deleted with its release before the namespace goes: an
// unavailable aggregated API stalls the namespace controller and the
// garbage collector for every other test.
func TestUnavailableAPIServiceIsNotReadyAndTheRestGoesOn(t *testing.T) {
	e := newEnv(t, "apisvc", watchOptions{hooked: true, hookedChart: "apiservice", hookedScope: map[string]any{
		"clusterScoped": []any{map[string]any{"group": "apiregistration.k8s.io", "kind": "APIService",
			"names": []any{"v1beta1.{{namespace}}.e2e.helmapp.io"}}},
	}})
	group := e.ns + ".e2e.helmapp.io"
	apiService := "v1beta1." + group
	// Registered after newEnv's, so it runs first: whatever the outcome,
	// the APIService goes while the operator still runs, before the
	// namespace is deleted.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if _, err := suite.cp.Kubectl(ctx, "delete", "hooked", "api", "-n", e.ns, "--ignore-not-found", "--timeout=90s"); err != nil {
			t.Errorf("deleting hooked/api: %v", err)
		}
		if _, err := suite.cp.Kubectl(ctx, "delete", "apiservice", apiService, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Errorf("deleting apiservice/%s: %v", apiService, err)
		}
	})

	// Another kind's spec change, timed before the aggregated API exists.
	e.applyNginx("web", "  replicaCount: 1\n")
	e.waitCondition("web", typeReady)
	usual := e.upgradeNginx("web", "before")

	start := time.Now()
	e.applyHooked("api", "  {}\n")
	n := e.waitHooked("api", "Deployed=True, Ready=False APIServiceUnavailable", func(n *nginx) bool {
		r := n.cond(typeReady)
		return n.is("Deployed", metav1.ConditionTrue) && n.is(typeReady, metav1.ConditionFalse) && r.Reason == "APIServiceUnavailable"
	})
	took := time.Since(start)
	t.Logf("Ready=False APIServiceUnavailable %s after the apply: %s", took.Round(100*time.Millisecond), n.cond(typeReady).Message)
	if took > 60*time.Second {
		t.Errorf("Ready=False APIServiceUnavailable came %s after the apply, over 60 s", took)
	}
	reason := strings.TrimSpace(e.kubectl("get", "apiservice", apiService, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].reason}`))
	if msg := n.cond(typeReady).Message; !strings.Contains(msg, "APIService "+apiService+": Available=False "+reason) {
		t.Errorf("Ready's message does not name the APIService and the API server's reason %q: %q", reason, msg)
	}
	// Discovery is partial for every client of the cluster: the group
	// listed, stale, with no resources.
	dc, err := discovery.NewDiscoveryClientForConfig(suite.cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	e.eventually("api", "discovery failing for group "+group, func(context.Context) (bool, string) {
		_, _, err := dc.ServerGroupsAndResources()
		var failed *discovery.ErrGroupDiscoveryFailed
		if errors.As(err, &failed) {
			for gv := range failed.Groups {
				if gv.Group == group {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("discovery: %v", err)
	})

	// A new operator process, whose discovery starts with the group broken.
	if err := e.op.stop(); err != nil {
		t.Fatal(err)
	}
	auditFrom := auditSize()
	e.restart()
	during := e.upgradeNginx("web", "during")
	if bound := 3*usual + 20*time.Second; during > bound {
		t.Errorf("the Nginx's spec change took %s while the aggregated API is unavailable, %s before it was (bound %s)", during, usual, bound)
	}
	// The broken release itself upgrades, its APIService applied again.
	e.kubectl("patch", "hooked", "api", "--type=merge", "-p", `{"spec":{"replicas":0}}`)
	n = e.waitHooked("api", "upgraded, still Ready=False APIServiceUnavailable", func(n *nginx) bool {
		d := n.cond("Deployed")
		return n.is("Deployed", metav1.ConditionTrue) && d.Reason == "UpgradeSuccessful" &&
			n.is(typeReady, metav1.ConditionFalse) && n.cond(typeReady).Reason == "APIServiceUnavailable"
	})
	t.Logf("kubectl describe hooked api:\n%s", e.kubectl("describe", "hooked", "api"))
	// More reconciles of both, each awaited: a discovery retried per
	// reconcile would show in the audit log below.
	for i := 1; i <= 5; i++ {
		for _, r := range []string{"hooked/api", "nginx/web"} {
			e.kubectl("annotate", "--overwrite", r, fmt.Sprintf("helmapp.io/retry=%d", i))
		}
		for _, r := range []string{"hooked/api", "nginx/web"} {
			e.eventually("web", fmt.Sprintf("%s lastHandledRetry %d", r, i), func(context.Context) (bool, string) {
				out, err := e.tryKubectl("get", r, "-o", "jsonpath={.status.lastHandledRetry}")
				return err == nil && out == fmt.Sprint(i), fmt.Sprintf("lastHandledRetry %q %v", out, err)
			})
		}
	}

	// The group named once in the new process' log, at most once in the first's.
	for i, p := range []string{e.dir + "/operator.log", e.logPath} {
		got := countLines(t, p, discoveryLogLine, group)
		if got > 1 || (i == 1 && got != 1) {
			t.Errorf("%s names the failing group %s in %d lines %q, want once", p, group, got, discoveryLogLine)
		}
	}
	// No loop of discovery requests: what the new process asked of the
	// group, and of discovery as a whole, since it started.
	reqs := operatorRequests(t, auditFrom)
	var ofGroup, discoveries []string
	for _, r := range reqs {
		switch {
		case strings.HasPrefix(r, "/apis/"+group):
			ofGroup = append(ofGroup, r)
		case r == "/api" || r == "/apis" || strings.HasPrefix(r, "/api?") || strings.HasPrefix(r, "/apis?"):
			discoveries = append(discoveries, r)
		}
	}
	window := time.Since(e.opStarted).Round(100 * time.Millisecond)
	t.Logf("in %s the new operator made %d requests: %d of the group %s %v, %d of discovery (/api, /apis)", window, len(reqs), len(ofGroup), group, ofGroup, len(discoveries))
	if len(ofGroup) > 2 {
		t.Errorf("the operator asked the API server for the broken group %d times in %s: %v", len(ofGroup), window, ofGroup)
	}
	// At its start controller-runtime's REST mapper reads /api and /apis,
	// and the capabilities read them once per their TTL (a minute).
	if allowed := 2 + 2*(1+int(window/time.Minute)); len(discoveries) > allowed {
		t.Errorf("the operator read discovery %d times in %s, more than its start and its capabilities' reads (%d): %v", len(discoveries), window, allowed, discoveries)
	}

	// Deleting the resource uninstalls the release, APIService included,
	// before the namespace goes.
	e.kubectl("delete", "hooked", "api", "--timeout=90s")
	if out := strings.TrimSpace(e.kubectl("get", "apiservice", apiService, "--ignore-not-found", "-o", "name")); out != "" {
		t.Errorf("%s is left after its release was uninstalled", out)
	}
	// Discovery is whole again: the namespace controller and the garbage
	// collector can finish this namespace's deletion and the next tests'.
	e.eventually("api", "discovery whole again", func(context.Context) (bool, string) {
		_, _, err := dc.ServerGroupsAndResources()
		return err == nil, fmt.Sprintf("discovery: %v", err)
	})
}

// upgradeNginx changes nginx/name's page title and waits until the change
// is deployed (Deployed=True UpgradeSuccessful at the new generation); it
// returns how long that took.
func (e *env) upgradeNginx(name, title string) time.Duration {
	e.t.Helper()
	start := time.Now()
	e.kubectl("patch", "nginx", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"page":{"title":%q}}}`, title))
	e.waitNginx(name, "upgraded to title "+title, func(n *nginx) bool {
		d := n.cond("Deployed")
		return n.is("Deployed", metav1.ConditionTrue) && d.Reason == "UpgradeSuccessful"
	})
	took := time.Since(start)
	e.t.Logf("nginx/%s spec change (title %q) deployed in %s", name, title, took.Round(100*time.Millisecond))
	return took
}

// countLines counts the lines of file p holding every one of subs.
func countLines(t *testing.T, p string, subs ...string) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
lines:
	for sc.Scan() {
		for _, s := range subs {
			if !strings.Contains(sc.Text(), s) {
				continue lines
			}
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// operatorRequests returns the request URIs of the operator's requests
// (user agent manager/...) in the audit log from byte from on, each once
// (its ResponseComplete, or ResponseStarted for a watch still open).
func operatorRequests(t *testing.T, from int64) []string {
	t.Helper()
	f, err := os.Open(suite.cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			AuditID    string `json:"auditID"`
			UserAgent  string `json:"userAgent"`
			RequestURI string `json:"requestURI"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || !strings.HasPrefix(ev.UserAgent, "manager/") || seen[ev.AuditID] {
			continue
		}
		seen[ev.AuditID] = true
		out = append(out, ev.RequestURI)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
