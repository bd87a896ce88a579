package reconciler_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Issue 20 item 2: a settled resource costs nothing — after a restart at
// most one read of its latest release record, and nothing at all on its
// periodic reconciles — and what must still be seen is seen.

// apiLog records every request of the operator, watches left out.
type apiLog struct {
	mu   sync.Mutex
	reqs []tu.Request
}

func (l *apiLog) add(r tu.Request) {
	if r.Watch {
		return
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

func (l *apiLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *apiLog) since(n int) []tu.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]tu.Request(nil), l.reqs[n:]...)
}

// quiet waits until the operator has made no request for a second.
func (l *apiLog) quiet(t *testing.T) {
	t.Helper()
	last, since := l.mark(), time.Now()
	tu.Eventually(t, time.Minute, "the operator to fall quiet", func() (bool, string) {
		if n := l.mark(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > time.Second, "still making requests"
	})
}

// costs sorts requests into what a test asserts: writes, lists of a
// release's history (Helm's Query: a label selector naming the release),
// reads of one release record, and the rest.
type costs struct {
	writes, historyLists, recordGets, other []string
}

func costOf(reqs []tu.Request, ns string) costs {
	var c costs
	secrets := "/api/v1/namespaces/" + ns + "/secrets"
	for _, r := range reqs {
		s := r.Method + " " + r.Path
		if r.LabelSelector != "" {
			s += "?labelSelector=" + r.LabelSelector
		}
		switch {
		case r.Method != http.MethodGet:
			c.writes = append(c.writes, s)
		case r.Path == secrets && strings.Contains(","+r.LabelSelector, ",name="):
			c.historyLists = append(c.historyLists, s)
		case strings.HasPrefix(r.Path, secrets+"/sh.helm.release.v1."):
			c.recordGets = append(c.recordGets, s)
		default:
			c.other = append(c.other, s)
		}
	}
	return c
}

func (c costs) String() string {
	var b strings.Builder
	for _, g := range []struct {
		name string
		reqs []string
	}{{"writes", c.writes}, {"history lists", c.historyLists}, {"record gets", c.recordGets}, {"other", c.other}} {
		fmt.Fprintf(&b, "%s (%d):\n", g.name, len(g.reqs))
		for _, r := range g.reqs {
			b.WriteString("  " + r + "\n")
		}
	}
	return b.String()
}

// newSettledEnv is an env whose operator's every request is recorded.
func newSettledEnv(t *testing.T, watchesPath string, mutate ...func(*operator.Config)) (*env, *apiLog) {
	t.Helper()
	e := newNamespace(t)
	log := &apiLog{}
	counted := tu.RecordRequests(cfg, log.add)
	logger := zap.New(zap.WriteTo(e.logs), zap.Level(zapcore.InfoLevel))
	e.startOp = func() func() {
		return operatortest.Start(t, counted, watchesPath, []string{e.ns}, e.configure(logger, mutate))
	}
	e.stopOp = e.startOp()
	return e, log
}

// waitReconciles waits until the operator has read the watched resources
// n more times than before (each reconcile reads its resource once).
func (e *env) waitReconciles(before int64, n int, what string) {
	e.t.Helper()
	tu.Eventually(e.t, time.Minute, what, func() (bool, string) {
		got := e.gets.Load() - before
		return got >= int64(n), fmt.Sprintf("%d of %d reconciles", got, n)
	})
}

// A new process over settled resources writes nothing, stores no revision,
// never lists a release's history, and reads at most one release record
// per resource. What else it asks (logged) is its caches' start: discovery,
// and the first readiness reads of a kind while its watch starts.
func TestRestartOverSettledResourcesCostsAtMostOneRead(t *testing.T) {
	t.Parallel()
	e, log := newSettledEnv(t, testWatches(t))
	names := []string{"g0", "g1", "g2", "g3"}
	for _, n := range names {
		e.create(gadgetGVK, n, map[string]any{"count": int64(len(n))})
	}
	for _, n := range names {
		e.wait(gadgetGVK, n, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	}
	log.quiet(t)

	e.stopOp()
	start, gets := log.mark(), e.gets.Load()
	e.stopOp = e.startOp()
	e.waitReconciles(gets, len(names), "the new process to reconcile every resource")
	log.quiet(t)
	c := costOf(log.since(start), e.ns)
	if len(c.writes) != 0 || len(c.historyLists) != 0 || len(c.recordGets) > len(names) {
		t.Errorf("a new process over %d settled resources: want 0 writes, 0 lists of a release's history, at most %d reads of a release record; got\n%s",
			len(names), len(names), c)
	}
	t.Logf("restart over %d settled resources:\n%s", len(names), c)
	for _, n := range names {
		if h := history(t, e.ns, n); len(h) != 1 {
			t.Errorf("release %s has %d revisions after the restart, want 1", n, len(h))
		}
		if u := e.get(gadgetGVK, n); !tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful) {
			t.Errorf("%s is no longer Ready after the restart: %s", n, tu.Describe(u))
		}
	}
}

// The periodic reconcile of a settled resource makes no request for Helm's
// release records at all, and writes nothing: the decision and the drift
// check read the metadata cache and the memo.
func TestPeriodicReconcileReadsNoReleaseRecord(t *testing.T) {
	t.Parallel()
	e, log := newSettledEnv(t, testWatches(t), func(c *operator.Config) { c.ReconcilePeriod = 2 * time.Second })
	e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	// The first periodic reconcile may read the latest record once.
	e.waitReconciles(e.gets.Load(), 1, "a first periodic reconcile")

	start, gets := log.mark(), e.gets.Load()
	e.waitReconciles(gets, 3, "three periodic reconciles")
	c := costOf(log.since(start), e.ns)
	if len(c.writes) != 0 || len(c.historyLists) != 0 || len(c.recordGets) != 0 {
		t.Errorf("three periodic reconciles of a settled resource: want no write and no request for a release record; got\n%s", c)
	}
	if h := history(t, e.ns, "g"); len(h) != 1 {
		t.Errorf("%d revisions after the periodic reconciles, want 1", len(h))
	}
}

// Drift is still found and corrected by the periodic reconcile, with no
// read of a release record: the deployed manifest comes from the memo. One
// list of the release's history, just before the objects are restored,
// confirms that the revision restored is still the latest (a cached view
// of Helm's records may lag: TestDriftOverALaggingViewOfHelmsStorageIsNotRestored).
// Dependent watches are off, so that only the periodic reconcile can see
// the change.
func TestPeriodicReconcileCorrectsDriftWithoutReadingReleaseRecords(t *testing.T) {
	t.Parallel()
	e, log := newSettledEnv(t, testWatches(t, "watchDependentResources: false"),
		func(c *operator.Config) { c.ReconcilePeriod = 2 * time.Second })
	ctx := context.Background()
	cr := e.create(gadgetGVK, "g", map[string]any{"count": int64(3)})
	e.wait(gadgetGVK, "g", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.waitReconciles(e.gets.Load(), 1, "a first periodic reconcile")

	start := log.mark()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: e.ns}}
	if err := e.c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"count":"7"}}`))); err != nil {
		t.Fatal(err)
	}
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	if !strings.Contains(ev.Message, "ConfigMap g (changed)") {
		t.Errorf("DriftCorrected event %q does not name the ConfigMap", ev.Message)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["count"] != "3" {
		t.Errorf("the ConfigMap was not restored: %v %v", cm.Data, err)
	}
	c := costOf(log.since(start), e.ns)
	if len(c.historyLists) != 1 || len(c.recordGets) != 0 {
		t.Errorf("the periodic reconcile that corrected drift read release records other than one list of the history, to confirm the revision it restores:\n%s", c)
	}
	if h := history(t, e.ns, "g"); len(h) != 1 {
		t.Errorf("%d revisions after the drift correction, want 1", len(h))
	}
}
