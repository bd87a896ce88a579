package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestRequestsPerAction counts the API requests of a real install and a real
// upgrade through the operator, on the real API server: no reachability
// probe (GET /version) once the reconcile has its Helm client; no list of
// Helm's storage for an install (the metadata cache of release records
// shows none: Runner.observeNone) and one for an upgrade (Helm's history
// read), however often Helm reads the history after it: the read-back after
// the action is answered by the storage driver from that and what it wrote
// (helmSecrets.known).
func TestRequestsPerAction(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "requests")
	log := &requestLog{}
	counted := tu.RecordRequests(cfg, func(r tu.Request) {
		log.add(event{method: r.Method, path: r.Path, selector: r.LabelSelector, watch: r.Watch})
	})
	operatortest.Start(t, counted, tu.DefaultWatches(t), []string{ns}, func(c *operator.Config) {
		c.WrapActionClientGetter = func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return markingGetter{ActionClientGetter: g, log: log}
		}
	})

	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "echo", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	install := log.reconcileWriting(t, ns, "echo", 1)
	if got := install.count(isVersionProbe); got != 0 {
		t.Errorf("install: %d GET /version after the Helm client was built, want 0:\n%s", got, install)
	}
	if got := install.count(isStorageList(ns, "echo")); got != 0 {
		t.Errorf("install: %d lists of Helm's storage, want 0 (the metadata cache shows no record; the read-back is the driver's):\n%s", got, install)
	}
	// Each of the chart's two objects (a ConfigMap, a Deployment) is read
	// once, by Helm before it creates it (its ownership check); its
	// readiness is judged from what the create returned.
	if got := install.count(isObjectGet(ns)); got != 2 {
		t.Errorf("install: %d reads of the chart's objects, want 2 (Helm's read before each create):\n%s", got, install)
	}

	// A patch: the operator writes the resource too (status, finalizer), so
	// a Get then Update could conflict with it.
	tu.PatchSpec(t, c, tu.EchoGVK, ns, "echo", map[string]any{"message": "two"})
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeDeployed, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	upgrade := log.reconcileWriting(t, ns, "echo", 2)
	if got := upgrade.count(isVersionProbe); got != 0 {
		t.Errorf("upgrade: %d GET /version after the Helm client was built, want 0:\n%s", got, upgrade)
	}
	if got := upgrade.count(isStorageList(ns, "echo")); got != 1 {
		t.Errorf("upgrade: %d lists of Helm's storage, want 1 (Helm's history read; the observation was the settled memo's, the read-back the driver's):\n%s", got, upgrade)
	}
}

// event is one entry of a requestLog: a request, or a mark that a reconcile
// of a resource began (it asks for its Helm client) or has its Helm client
// (whose building reads the cluster's capabilities, /version among them).
type event struct {
	mark, name     string // "begin" or "built", and the resource's name
	method, path   string
	selector       string
	watch, started bool
}

func (e event) String() string {
	if e.mark != "" {
		return fmt.Sprintf("-- %s %s", e.mark, e.name)
	}
	s := e.method + " " + e.path
	if e.selector != "" {
		s += "?labelSelector=" + e.selector
	}
	if e.watch {
		s += " (watch)"
	}
	return s
}

// requestLog records, in order, the requests an operator makes and the
// reconciles it runs.
type requestLog struct {
	mu     sync.Mutex
	events []event
}

func (l *requestLog) add(e event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// reconcileWriting returns the events of the reconcile of name that stored
// revision as deployed: from its begin mark to the next reconcile of name.
// Helm stores a revision as pending, then updates it (PUT) to deployed.
func (l *requestLog) reconcileWriting(t *testing.T, ns, name string, revision int) events {
	t.Helper()
	l.mu.Lock()
	all := append([]event(nil), l.events...)
	l.mu.Unlock()
	put := fmt.Sprintf("/api/v1/namespaces/%s/secrets/sh.helm.release.v1.%s.v%d", ns, name, revision)
	w := -1
	for i, e := range all {
		if e.method == http.MethodPut && e.path == put {
			w = i // the last update of the revision: the one that deploys it
		}
	}
	if w < 0 {
		t.Fatalf("no update of %s was seen", put)
	}
	begin, end := -1, len(all)
	for i := w; i >= 0 && begin < 0; i-- {
		if all[i].mark == "begin" && all[i].name == name {
			begin = i
		}
	}
	for i := w; i < len(all); i++ {
		if all[i].mark == "begin" && all[i].name == name {
			end = i
			break
		}
	}
	if begin < 0 {
		t.Fatalf("the update of %s was made outside a reconcile", put)
	}
	// Requests of the reconcile after its Helm client was built.
	var out events
	built := false
	for _, e := range all[begin:end] {
		if e.mark == "built" && e.name == name {
			built = true
		}
		if e.mark == "" {
			e.started = built
		}
		out = append(out, e)
	}
	return out
}

type events []event

func (es events) count(f func(event) bool) int {
	n := 0
	for _, e := range es {
		if e.mark == "" && f(e) {
			n++
		}
	}
	return n
}

func (es events) String() string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}

// isVersionProbe is a GET /version once the Helm client was built: the
// capabilities read while building it are not a probe.
func isVersionProbe(e event) bool {
	return e.started && e.method == http.MethodGet && e.path == "/version"
}

// isStorageList is a list of Helm's storage for the release: a list (not a
// watch) of the Secrets of ns selected by the release's name and owner=helm.
func isStorageList(ns, name string) func(event) bool {
	return func(e event) bool {
		if e.method != http.MethodGet || e.watch || e.path != "/api/v1/namespaces/"+ns+"/secrets" {
			return false
		}
		set := map[string]string{}
		for _, kv := range strings.Split(e.selector, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				set[k] = v
			}
		}
		return set["name"] == name && set["owner"] == "helm"
	}
}

// isObjectGet is a read of one of the echo chart's objects (a ConfigMap or
// a Deployment) in ns.
func isObjectGet(ns string) func(event) bool {
	return func(e event) bool {
		return e.method == http.MethodGet && !e.watch &&
			(strings.HasPrefix(e.path, "/api/v1/namespaces/"+ns+"/configmaps/") ||
				strings.HasPrefix(e.path, "/apis/apps/v1/namespaces/"+ns+"/deployments/"))
	}
}

// markingGetter marks the start of each reconcile, which asks for its
// resource's Helm client once, and the moment it has it.
type markingGetter struct {
	helmclient.ActionClientGetter
	log *requestLog
}

func (g markingGetter) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	g.log.add(event{mark: "begin", name: obj.GetName()})
	defer g.log.add(event{mark: "built", name: obj.GetName()})
	return g.ActionClientGetter.ActionClientFor(ctx, obj)
}
