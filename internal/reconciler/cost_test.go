package reconciler_test

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// requestLog records the operator's requests to the API server ("GET
// /api/v1/namespaces/x/secrets"), watches left out: they are the caches'.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) add(r tu.Request) {
	if r.Watch {
		return
	}
	what := r.Method + " " + r.Path
	if r.Method == http.MethodGet && r.LabelSelector != "" {
		what = "LIST " + r.Path
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, what)
	l.mu.Unlock()
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// since returns the requests after the first n, sorted.
func (l *requestLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.reqs[n:]...)
	sort.Strings(out)
	return out
}

// quiet waits until the operator has made no request for a second.
func (l *requestLog) quiet(t *testing.T) {
	t.Helper()
	last, since := l.count(), time.Now()
	tu.Eventually(t, time.Minute, "the operator to fall quiet", func() (bool, string) {
		if n := l.count(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > time.Second, "still making requests"
	})
}

// newCountedEnv is newEnv with the operator's requests recorded.
func newCountedEnv(t *testing.T) (*env, *requestLog) {
	t.Helper()
	e := newNamespace(t)
	log := &requestLog{}
	counted := tu.RecordRequests(cfg, log.add)
	logger := zap.New(zap.WriteTo(e.logs), zap.Level(zapcore.InfoLevel))
	watchesPath := testWatches(t)
	e.startOp = func() func() {
		return operatortest.Start(t, counted, watchesPath, []string{e.ns}, e.configure(logger, nil))
	}
	e.stopOp = e.startOp()
	return e, log
}

// An install is one reconcile: the creation events of the objects it made
// start no second one. The first reconcile that finds nothing to do costs
// one request, the read of the release's latest record (not of its whole
// history), and writes nothing: the resource, its objects (readiness,
// drift) are read from the caches. The next one costs no request at all:
// the record is unchanged in the metadata cache, and the memo holds it.
func TestNoOpReconcileCostsOneReadThenNone(t *testing.T) {
	t.Parallel()
	e, log := newCountedEnv(t)
	e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	log.quiet(t)
	if n := e.gets.Load(); n != 1 {
		t.Errorf("the install took %d reads of the resource, want 1: one reconcile, from the cache", n)
	}

	before, gets := log.count(), e.gets.Load()
	e.poke(gadgetGVK, "g")
	tu.Eventually(t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
		return e.gets.Load() > gets, "no reconcile yet"
	})
	log.quiet(t)
	got := log.since(before)
	record := "GET /api/v1/namespaces/" + e.ns + "/secrets/sh.helm.release.v1.g.v1"
	if len(got) != 1 || got[0] != record {
		t.Errorf("a reconcile with nothing to do made %d requests, want only %q:\n%s", len(got), record, strings.Join(got, "\n"))
	}

	before, gets = log.count(), e.gets.Load()
	e.poke(gadgetGVK, "g")
	tu.Eventually(t, 30*time.Second, "the second poke to be reconciled", func() (bool, string) {
		return e.gets.Load() > gets, "no reconcile yet"
	})
	log.quiet(t)
	if got := log.since(before); len(got) != 0 {
		t.Errorf("a second reconcile with nothing to do made %d requests, want none:\n%s", len(got), strings.Join(got, "\n"))
	}
	if u := e.get(gadgetGVK, "g"); !tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful) {
		t.Errorf("the resource is no longer Ready after a reconcile with nothing to do: %s", tu.Describe(u))
	}
}
