//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	operatorpkg "github.com/helmapp/helm-app-operator/internal/operator"
)

// Stale and missed views (issue 28): the operator runs with the test-only
// view perturbation (internal/operator/viewfault.go), the events of one
// resource held back (lag) or dropped (missed) by its informers while the
// test's window file exists. While the window is open the test acts as a
// user, a person with the helm CLI, or both; it records every status of
// the resource (statusRecorder) and checks that none the operator wrote
// lied; after the window the operator must converge, and the oracle holds.

// viewWindow is the file whose existence opens the perturbation's window,
// and the operator's environment that names it; since is where the
// operator's log stood when the window opened (log, offset).
type viewWindow struct {
	path, env string
	since     struct {
		log    string
		offset int
	}
}

func newViewWindow(t *testing.T, mode, resource string) *viewWindow {
	t.Helper()
	d, err := os.MkdirTemp(suite.dir, "view-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "window")
	return &viewWindow{path: p, env: fmt.Sprintf("%s=%s:%s:%s", operatorpkg.ViewEnv, mode, resource, p)}
}

func (w *viewWindow) open(e *env) {
	e.t.Helper()
	b, _ := os.ReadFile(e.logPath)
	w.since.log, w.since.offset = e.logPath, len(b)
	if err := os.WriteFile(w.path, nil, 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("view window opened")
}

// logSince is the lines the operator logged since the window opened.
func (w *viewWindow) logSince(e *env) ([]string, error) {
	b, err := os.ReadFile(e.logPath)
	if err != nil {
		return nil, err
	}
	if e.logPath == w.since.log && len(b) >= w.since.offset {
		b = b[w.since.offset:]
	}
	return strings.Split(string(b), "\n"), nil
}

// waitPerturbed waits until the operator's log says that its view
// perturbation held back or dropped (verb) an event of type typ (ADDED,
// MODIFIED, DELETED) in this window, so that what the test does next
// follows it.
func (w *viewWindow) waitPerturbed(e *env, verb, typ string) {
	e.t.Helper()
	want := fmt.Sprintf("%s: %s an event (%s)", operatorpkg.ViewEnv, verb, typ)
	e.eventually("web", "the operator's log saying: "+want, func(context.Context) (bool, string) {
		lines, err := w.logSince(e)
		return err == nil && slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }), fmt.Sprint(err)
	})
}

// close closes the window and waits until the operator's log says that it
// perturbed something (want: "held back" or "dropped"): a window that
// perturbed nothing tested nothing.
func (w *viewWindow) close(e *env, want string) {
	e.t.Helper()
	if err := os.Remove(w.path); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("web", "the operator's log saying its view perturbation "+want+" events", func(context.Context) (bool, string) {
		lines, err := w.logSince(e)
		if err != nil {
			return false, err.Error()
		}
		for _, l := range lines {
			if strings.Contains(l, operatorpkg.ViewEnv+": window closed") && strings.Contains(l, want) && !strings.Contains(l, ": 0 event(s)") {
				e.t.Logf("%s", l[strings.Index(l, operatorpkg.ViewEnv):])
				return true, ""
			}
		}
		return false, "no such line yet"
	})
}

// seenStatus is one version of a resource's status, as a watch delivered
// it, with what was wrong with it when it was seen.
type seenStatus struct {
	uid, rv string
	// since is the resourceVersion of the status written before this one:
	// the reconcile that wrote this one read Helm after it
	// (views_records_test.go).
	since     string
	gen, obs  int64
	ready     bool // Ready=True at the generation
	revision  int64
	title     string // the spec's page.title
	violation string
}

// statusRecorder watches one Nginx and checks every status the operator
// writes (a version whose status differs from the one before it), when it
// is seen:
//
//   - its deployedRelease names a revision Helm has (or had after the
//     status written before it, when the reconcile that wrote it read
//     Helm: views_records_test.go);
//   - Ready=True at the generation only if that revision's values carry the
//     spec's page.title (the spec of this resource, not of an earlier one
//     of the same name).
type statusRecorder struct {
	e    *env
	name string
	mu   sync.Mutex
	seen []seenStatus
	last map[string]string // uid → the status JSON seen last
	// lastRV is, by uid, the resourceVersion of the status written last.
	lastRV map[string]string
	// deleted are the release's records deleted since the recording began
	// (views_records_test.go).
	deleted []deletedRecord
	stop    context.CancelFunc
	done    chan struct{}
}

func (e *env) recordStatuses(name string) *statusRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r, records := e.newStatusRecorder(ctx, cancel, name)
	go func() {
		defer close(r.done)
		defer func() { <-records }()
		e.watchObjects(ctx, nginxGVR, metav1.ListOptions{FieldSelector: "metadata.name=" + name},
			func(u *unstructured.Unstructured, deleted bool, _ time.Time) bool {
				if !deleted {
					r.observe(u)
				}
				return false
			})
	}()
	e.t.Cleanup(r.finish)
	return r
}

func (r *statusRecorder) finish() {
	r.stop()
	<-r.done
}

func (r *statusRecorder) observe(u *unstructured.Unstructured) {
	st, _ := json.Marshal(u.Object["status"])
	uid := string(u.GetUID())
	r.mu.Lock()
	prev, known := r.last[uid]
	r.last[uid] = string(st)
	since := r.lastRV[uid]
	if !known || prev != string(st) {
		r.lastRV[uid] = u.GetResourceVersion()
	}
	r.mu.Unlock()
	n := &nginx{}
	if err := fromUnstructured(u, n); err != nil {
		return
	}
	s := seenStatus{uid: uid, rv: u.GetResourceVersion(), since: since, gen: n.Metadata.Generation, obs: n.Status.ObservedGeneration,
		ready: n.is(typeReady, metav1.ConditionTrue)}
	s.revision, _, _ = unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision")
	s.title, _, _ = unstructured.NestedString(u.Object, "spec", "page", "title")
	// The first version seen of a resource was written before the
	// recording began; an unchanged status was not written now.
	if known && prev != string(st) && s.revision > 0 {
		if s.violation = r.check(s); s.violation != "" && r.trueWhenWritten(s) {
			s.violation = ""
		}
		if s.violation != "" {
			s.violation += "; the status: " + strings.ReplaceAll(strings.TrimSpace(n.String()), "\n", ";")
		}
	}
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
}

// check is what is wrong with the status s, "" when nothing, against
// Helm's records as they are now (trueWhenWritten then rules out a record
// deleted since s was written).
func (r *statusRecorder) check(s seenStatus) string {
	recs, _, err := r.e.releaseRecords(r.name)
	if err != nil {
		return "" // not checked; the oracle reads Helm again later
	}
	var have []string
	for _, rec := range recs {
		have = append(have, fmt.Sprintf("%d=%s", rec.Version, rec.Info.Status))
		if int64(rec.Version) != s.revision {
			continue
		}
		page, _ := rec.Config["page"].(map[string]any)
		if s.ready && s.obs == s.gen && page["title"] != s.title {
			return fmt.Sprintf("uid %s rv %s: Ready=True at generation %d naming revision %d, whose values have page.title %v, not the spec's %q",
				s.uid, s.rv, s.gen, s.revision, page["title"], s.title)
		}
		return ""
	}
	return fmt.Sprintf("uid %s rv %s: deployedRelease names revision %d; Helm has %v", s.uid, s.rv, s.revision, have)
}

// caughtUp waits until the recorder has seen the resource's current
// version, so that what the test does next happens after every status
// written so far was checked.
func (r *statusRecorder) caughtUp() {
	r.e.t.Helper()
	r.e.eventually(r.name, "the status recorder to catch up", func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(nginxGVR).Namespace(r.e.ns).Get(ctx, r.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, s := range r.seen {
			if s.rv == u.GetResourceVersion() {
				return true, ""
			}
		}
		return false, "resourceVersion " + u.GetResourceVersion() + " not seen yet"
	})
}

// check fails the test with every status that lied; it logs how many were
// checked.
func (r *statusRecorder) verify() {
	r.e.t.Helper()
	r.caughtUp()
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	for _, s := range r.seen {
		if s.violation != "" {
			bad = append(bad, s.violation)
		}
	}
	if len(bad) > 0 {
		r.e.fatalf("%d status(es) of nginx/%s lied:\n  %s", len(bad), r.name, strings.Join(bad, "\n  "))
	}
	r.e.t.Logf("status recorder: %d version(s) of nginx/%s seen, every status written checked", len(r.seen), r.name)
}

// nginxPage is an Nginx spec serving title, with the oracle's marker.
func nginxPage(title string) string {
	return fmt.Sprintf("  replicaCount: 1\n  page:\n    title: %s\n    body: %s\n", title, specSecret)
}

// pageConfigMap is the name of the ConfigMap of release name's page, once
// it exists.
func (e *env) pageConfigMap(name string) string {
	e.t.Helper()
	var cm string
	e.eventually(name, "the release's ConfigMap", func(ctx context.Context) (bool, string) {
		out, err := e.tryKubectl("get", "configmap", "-l", "app.kubernetes.io/instance="+name, "-o", "jsonpath={.items[*].metadata.name}")
		cm = strings.TrimSpace(out)
		return err == nil && cm != "" && !strings.Contains(cm, " "), fmt.Sprintf("%q %v", cm, err)
	})
	return cm
}

// waitConfigMap waits until ConfigMap cm exists.
func (e *env) waitConfigMap(owner, cm string) {
	e.t.Helper()
	e.eventually(owner, "ConfigMap "+cm+" restored", func(ctx context.Context) (bool, string) {
		_, err := suite.kube.CoreV1().ConfigMaps(e.ns).Get(ctx, cm, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitServing waits until nginx/name is Ready at its generation with the
// uid given (any when empty), its deployed revision's values carrying
// title; it returns that revision.
func (e *env) waitServing(name, uid, title string) int64 {
	e.t.Helper()
	var rev int64
	e.eventually(name, "Ready with page.title "+title+" deployed", func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(nginxGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		rev, _, _ = unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision")
		recs, _, err := e.releaseRecords(name)
		if err != nil {
			return false, err.Error()
		}
		for _, rec := range recs {
			page, _ := rec.Config["page"].(map[string]any)
			if int64(rec.Version) == rev && rec.Info.Status == "deployed" && page["title"] == title &&
				n.is(typeReady, metav1.ConditionTrue) && (uid == "" || string(u.GetUID()) == uid) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("uid %s, deployedRelease.revision %d; %s", u.GetUID(), rev, n)
	})
	return rev
}

// The operator misses every event of its own resources for a window,
// twice. First a spec change, then the resource deleted (it has no
// finalizer, so that it goes without the operator: the garbage
// collector deletes its release's records and objects, which it owns) and
// created again with the same name, another uid and another spec; the
// operator, woken by its release's records and objects going, acts on the
// old resource still in its cache. Then, the new resource deployed, a spec
// change missed while the release's ConfigMap is deleted by hand: the
// operator restores it for the generation it still sees. No status it
// writes may name a revision Helm does not have, or claim the resource
// Ready on a revision without its spec; after each window (410 Expired, a
// new list) the spec the resource has is deployed, the second time as an
// upgrade (the release of a resource that exists is never uninstalled), and
// the oracle holds. While the operator cannot see the new resource, it
// writes no status on it (the status of the old one used to land there).
func TestViewMissedResourceEvents(t *testing.T) {
	w := newViewWindow(t, "missed", "nginxes")
	e := newEnv(t, "e2e-view-cr", watchOptions{operatorEnv: []string{w.env}})
	rec := e.recordStatuses("web")
	e.applyNginx("web", nginxPage("one"))
	e.waitServing("web", "", "one")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
	oldUID := e.kubectl("get", "nginx", "web", "-o", "jsonpath={.metadata.uid}")

	w.open(e)
	e.kubectl("patch", "nginx", "web", "--type=merge", "-p", `{"spec":{"page":{"title":"two"}}}`)
	e.kubectl("delete", "nginx", "web", "--wait=false")
	// Its release needs no finalizer (issue 41), so it goes at once; one an
	// earlier version put on would be taken off here, the operator blind.
	_, _ = e.tryKubectl("patch", "nginx", "web", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	e.eventually("web", "nginx/web gone", func(ctx context.Context) (bool, string) {
		_, err := e.getNginx(ctx, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	e.applyNginx("web", nginxPage("three"))
	newUID := e.kubectl("get", "nginx", "web", "-o", "jsonpath={.metadata.uid}")
	if newUID == oldUID {
		e.fatalf("the re-created nginx/web has the old uid %s", oldUID)
	}
	w.waitPerturbed(e, "dropped", "ADDED")
	e.eventually("web", "the old resource's release records collected", func(ctx context.Context) (bool, string) {
		l, err := suite.kube.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "helmapp.io/owner-uid=" + oldUID})
		return err == nil && len(l.Items) == 0, fmt.Sprint(err)
	})
	rec.caughtUp()
	// The operator cannot see the new resource yet: any status on it was
	// computed for the old one.
	if u, err := suite.dyn.Resource(nginxGVR).Namespace(e.ns).Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
		e.fatalf("%v", err)
	} else if st, ok, _ := unstructured.NestedMap(u.Object, "status"); ok && len(st) > 0 {
		n := &nginx{}
		_ = fromUnstructured(u, n)
		e.fatalf("nginx/web uid %s, which the operator cannot see yet, has a status, computed for the old resource (uid %s):\n%s", newUID, oldUID, n)
	}
	w.close(e, "dropped")
	e.waitServing("web", newUID, "three")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})

	before := e.latestRevision("web")
	cm := e.pageConfigMap("web")
	w.open(e)
	e.kubectl("patch", "nginx", "web", "--type=merge", "-p", `{"spec":{"page":{"title":"four"}}}`)
	w.waitPerturbed(e, "dropped", "MODIFIED")
	e.kubectl("delete", "configmap", cm)
	e.waitConfigMap("web", cm)
	rec.caughtUp()
	w.close(e, "dropped")
	e.waitServing("web", newUID, "four")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
	h, err := e.history("web")
	if err != nil {
		e.fatalf("%v", err)
	}
	if len(h) < before+1 || !strings.HasPrefix(h[0], "1=") {
		e.fatalf("history %v after the missed spec change, revision %d before it: the release was uninstalled while its resource existed", h, before)
	}
	rec.verify()
}

// latestRevision is release name's latest revision in Helm's records.
func (e *env) latestRevision(name string) int {
	e.t.Helper()
	recs, _, err := e.releaseRecords(name)
	if err != nil || len(recs) == 0 {
		e.fatalf("the records of release %s: %d, %v", name, len(recs), err)
	}
	return recs[len(recs)-1].Version
}

// The operator is restarted with a lagging view of Helm's storage: every
// event of the release Secrets after its first list is held back for a
// window. Meanwhile a person runs `helm upgrade`, `helm rollback` and
// `helm uninstall` by hand, and the operator is made to act on its stale
// view (the release's ConfigMap deleted; then a spec change, which it
// must act on). No status it writes may name a revision Helm does not have
// or claim Ready on a revision without the spec. After the window it
// converges to the spec, and the oracle holds.
func TestViewLaggingHelmStorage(t *testing.T) {
	w := newViewWindow(t, "lag", "secrets")
	e := newEnv(t, "e2e-view-storage", watchOptions{operatorEnv: []string{w.env}})
	e.applyNginx("web", nginxPage("one"))
	e.waitServing("web", "", "one")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
	cm := e.pageConfigMap("web")
	chart := filepath.Join(suite.root, "helm-charts", "nginx")

	e.kill()
	w.open(e)
	e.restart()
	rec := e.recordStatuses("web")
	rec.caughtUp()

	e.helmByHand(false, "upgrade", "web", chart, "--reuse-values", "--set", "page.title=by-hand", "--description", byHand)
	w.waitPerturbed(e, "held back", "ADDED")
	e.kubectl("delete", "configmap", cm)
	rec.caughtUp()
	e.helmByHand(false, "rollback", "web", "1")
	e.kubectl("delete", "configmap", cm)
	rec.caughtUp()
	e.helmByHand(false, "uninstall", "web")
	rec.caughtUp()
	e.kubectl("patch", "nginx", "web", "--type=merge", "-p", `{"spec":{"page":{"title":"four"}}}`)
	e.waitNginx("web", "a status for generation 2", func(n *nginx) bool { return n.Status.ObservedGeneration == 2 })
	rec.caughtUp()
	w.close(e, "held back")

	e.waitServing("web", "", "four")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
	rec.verify()
}

// The operator misses the events of the releases' ConfigMaps for a
// window, during which the release's ConfigMap is deleted by hand: its
// cache still holds it. When the window ends (410 Expired, a new list, the
// deletion found), it restores it, and the oracle holds.
func TestViewMissedChartObjectEvents(t *testing.T) {
	w := newViewWindow(t, "missed", "configmaps")
	e := newEnv(t, "e2e-view-objects", watchOptions{operatorEnv: []string{w.env}})
	e.applyNginx("web", nginxPage("one"))
	e.waitServing("web", "", "one")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
	cm := e.pageConfigMap("web")

	w.open(e)
	e.kubectl("delete", "configmap", cm)
	w.waitPerturbed(e, "dropped", "DELETED")
	w.close(e, "dropped")
	e.waitConfigMap("web", cm)
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
}
