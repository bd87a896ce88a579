package reconciler_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/operator"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Issue 27 item 5: a new process over settled resources lists each
// namespace's deployed release records once, in pages, instead of reading
// each resource's record alone; what someone changed while no operator ran
// is still seen, and a list the operator may not make falls back to the
// reads of one record.

// isPreloadList is a list of the namespace's deployed Helm records (the
// preload's): owner=helm and status=deployed, naming no release.
func isPreloadList(ns string) func(tu.Request) bool {
	return func(r tu.Request) bool {
		sel := "," + r.LabelSelector + ","
		return r.Method == "GET" && !r.Watch && r.Path == "/api/v1/namespaces/"+ns+"/secrets" &&
			strings.Contains(sel, ",owner=helm,") && strings.Contains(sel, ",status=deployed,") && !strings.Contains(sel, ",name=")
	}
}

func count(reqs []tu.Request, f func(tu.Request) bool) int {
	n := 0
	for _, r := range reqs {
		if f(r) {
			n++
		}
	}
	return n
}

// restartSettled creates names (Gadgets), waits until they are Ready and the
// operator quiet, restarts it, and returns the requests of the new process
// once it reconciled every resource and fell quiet.
func restartSettled(t *testing.T, e *env, log *apiLog, names []string) []tu.Request {
	t.Helper()
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
	return log.since(start)
}

// A new process reads no release record alone: one list of the
// namespace's deployed records serves every resource.
func TestRestartReadsNoReleaseRecordAlone(t *testing.T) {
	t.Parallel()
	e, log := newSettledEnv(t, testWatches(t))
	names := []string{"p0", "p1", "p2", "p3", "p4", "p5"}
	reqs := restartSettled(t, e, log, names)
	c := costOf(reqs, e.ns)
	lists := count(reqs, isPreloadList(e.ns))
	if len(c.writes) != 0 || len(c.historyLists) != 0 || len(c.recordGets) != 0 || lists != 1 {
		t.Errorf("a new process over %d settled resources: want 0 writes, 0 lists of a release's history, 0 reads of a release record and 1 list of the deployed records; got %d such lists and\n%s",
			len(names), lists, c)
	}
	for _, n := range names {
		if h := history(t, e.ns, n); len(h) != 1 {
			t.Errorf("release %s has %d revisions after the restart, want 1", n, len(h))
		}
		if u := e.get(gadgetGVK, n); !tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful) {
			t.Errorf("%s is no longer Ready after the restart: %s", n, tu.Describe(u))
		}
	}
}

// A list of the deployed records the operator may not make (a forbidden
// list, injected: the metadata cache needs the same right, so RBAC cannot
// refuse one and allow the other) is said in the log, and each resource
// reads its record alone, as before the preload.
func TestRestartFallsBackWhenTheListIsForbidden(t *testing.T) {
	t.Parallel()
	e, log := newSettledEnv(t, testWatches(t), func(c *operator.Config) {
		c.WrapPreload = func(rel.Loader) rel.Loader {
			return func(context.Context, string, func(*corev1.Secret)) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
			}
		}
	})
	names := []string{"f0", "f1", "f2"}
	reqs := restartSettled(t, e, log, names)
	c := costOf(reqs, e.ns)
	if len(c.writes) != 0 || len(c.historyLists) != 0 || len(c.recordGets) != len(names) {
		t.Errorf("a new process over %d settled resources whose list is forbidden: want 0 writes, 0 lists of a release's history, %d reads of a release record; got\n%s",
			len(names), len(names), c)
	}
	if !strings.Contains(e.logs.String(), "listing the deployed release records failed; each is read alone") {
		t.Errorf("the log does not say that the list failed:\n%s", e.logs.String())
	}
	for _, n := range names {
		if u := e.get(gadgetGVK, n); !tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful) {
			t.Errorf("%s is no longer Ready after the restart: %s", n, tu.Describe(u))
		}
	}
}

// `helm upgrade` by hand while no operator runs: the new process, whose
// list of deployed records serves the other resources, reports and undoes
// the CLI's revision as a running one does.
func TestHelmUpgradeWhileNoOperatorRanIsUndone(t *testing.T) {
	t.Parallel()
	e, log := newSettledEnv(t, testWatches(t), quiet)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "From the spec"}})
	e.create(gadgetGVK, "other", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.wait(gadgetGVK, "other", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	log.quiet(t)

	e.stopOp()
	e.helm("upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"), "--reuse-values", "--set", "page.title=By hand")
	statuses := e.recordStatuses(tu.NginxGVK, "web")
	start := log.mark()
	e.stopOp = e.startOp()
	e.undoneByTheOperator(cr, statuses, 2, `Helm's description "Upgrade complete"`, "From the spec")
	log.quiet(t)
	if n := count(log.since(start), isPreloadList(e.ns)); n != 1 {
		t.Errorf("%d lists of the deployed records by the new process, want 1", n)
	}
	if u := e.get(gadgetGVK, "other"); !tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful) {
		t.Errorf("other is no longer Ready after the restart: %s", tu.Describe(u))
	}
}
