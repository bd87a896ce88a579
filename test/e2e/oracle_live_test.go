//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// The oracle's checks while a test runs (issue 28): no revision pending
// unless an action of a live operator holds it, and no object or record of
// another resource changed by a step that targets one.

// pendingGrace is how long a pending revision may go without a live
// operator's action visibly holding it: the operator announces an action
// (Reconciling=True naming the revision) only once it has run 2 s
// (internal/reconciler/progress.go), and a killed operator's successor
// needs a few seconds to start, fill its caches and unlock what the dead
// one left. Beyond it, a pending revision is one nobody runs.
const pendingGrace = 15 * time.Second

// pendingWatch remembers since when each pending revision was seen
// without a holder.
type pendingWatch struct {
	unheld map[string]time.Time
}

func newPendingWatch() *pendingWatch { return &pendingWatch{unheld: map[string]time.Time{}} }

// unheldPending checks a snapshot: a pending revision is held when the
// test's operator process is alive and the resource's Reconciling=True
// message names the action on it (the revision it writes, or the release's
// uninstall). It returns a violation for every revision that has gone
// unheld for longer than pendingGrace, with what the operator showed.
func (e *env) unheldPending(w *pendingWatch, snap []*oracleResource) []string {
	alive := e.op.exited() == nil
	seen := map[string]bool{}
	var bad []string
	for _, r := range snap {
		c := r.n.cond(typeReconciling)
		for _, rec := range r.records {
			if rec.Info == nil || !rec.Info.Status.IsPending() {
				continue
			}
			key := fmt.Sprintf("%s revision %d %s", r.key, rec.Version, rec.Info.Status)
			seen[key] = true
			if alive && holds(c, rec) {
				delete(w.unheld, key)
				continue
			}
			since, ok := w.unheld[key]
			if !ok {
				w.unheld[key] = time.Now()
				continue
			}
			if d := time.Since(since); d > pendingGrace {
				shown := "no Reconciling=True"
				if c != nil && c.Status == metav1.ConditionTrue {
					shown = fmt.Sprintf("Reconciling=True %s %q", c.Reason, c.Message)
				}
				bad = append(bad, fmt.Sprintf("safety: %s for %.0fs with no action of a live operator holding it (operator alive: %v; the resource shows %s)",
					key, d.Seconds(), alive, shown))
			}
		}
	}
	for key := range w.unheld {
		if !seen[key] {
			delete(w.unheld, key)
		}
	}
	sort.Strings(bad)
	return bad
}

// holds tells whether the Reconciling condition c names the action that
// writes rec: "… release h at revision 2", "… to revision 2", "… going on
// at revision 2", or an uninstall of the release.
func holds(c *metav1.Condition, rec *helmrelease.Release) bool {
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "release "+rec.Name) {
		return false
	}
	if rec.Info.Status == helmrelease.StatusUninstalling {
		return strings.Contains(strings.ToLower(c.Message), "uninstall")
	}
	return strings.Contains(c.Message, fmt.Sprintf("revision %d,", rec.Version)) ||
		strings.HasSuffix(c.Message, fmt.Sprintf("revision %d", rec.Version)) ||
		strings.Contains(c.Message, fmt.Sprintf("revision %d ", rec.Version))
}

// neighbourSnapshot is what the resources of the watched kinds in the
// test's namespace whose release is not one of targets are made of, as the
// operator may not change it: each resource's uid, generation, spec,
// labels and finalizers (not its status, which the operator writes); the
// Helm records of its release (Secret name and resourceVersion, the
// chunked storage's index and chunk Secrets included); and every object of
// its deployed revision: uid, generation, labels and a digest of its data
// or spec (the controllers and kwok change only status and annotations of
// their own). A resource being deleted, or not settled, is left out.
type neighbourSnapshot map[string]string

func (e *env) neighbourSnapshot(targets []string) neighbourSnapshot {
	e.t.Helper()
	snap, err := e.oracleSnapshot()
	if err != nil {
		e.fatalf("oracle: neighbours: %v", err)
	}
	mapper, err := e.restMapper()
	if err != nil {
		e.fatalf("oracle: neighbours: %v", err)
	}
	out := neighbourSnapshot{}
	for _, r := range snap {
		name := r.u.GetName()
		if slices.Contains(targets, name) || r.u.GetDeletionTimestamp() != nil || len(e.unsettled([]*oracleResource{r}, oracleOptions{})) > 0 {
			continue
		}
		spec, _ := json.Marshal(r.u.Object["spec"])
		out[r.key] = fmt.Sprintf("uid %s, generation %d, spec %s, labels %v, finalizers %v", r.u.GetUID(), r.u.GetGeneration(),
			digestBytes(spec), r.u.GetLabels(), r.u.GetFinalizers())
		for k, v := range e.recordSecrets(name) {
			out[r.key+": "+k] = v
		}
		deployed := r.deployedRecord()
		if deployed == nil {
			continue
		}
		objs, err := manifestObjects(deployed.Manifest)
		if err != nil {
			e.fatalf("oracle: neighbours: the manifest of %s: %v", r.key, err)
		}
		for _, obj := range objs {
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				e.fatalf("oracle: neighbours: %v", err)
			}
			var get dynamic.ResourceInterface = suite.dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				get = suite.dyn.Resource(m.Resource).Namespace(e.ns)
			}
			live, err := get.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
			if err != nil {
				continue // not there: nothing to keep
			}
			var content []byte
			for _, f := range []string{"data", "binaryData", "stringData", "spec", "rules", "subjects", "roleRef"} {
				if v, ok := live.Object[f]; ok {
					b, _ := json.Marshal(v)
					content = append(append(content, f...), b...)
				}
			}
			out[r.key+": "+gvk.Kind+" "+obj.GetName()] = fmt.Sprintf("uid %s, generation %d, labels %v, content %s",
				live.GetUID(), live.GetGeneration(), live.GetLabels(), digestBytes(content))
		}
	}
	return out
}

// recordSecrets are the Secrets holding release name's records, Helm's and
// the chunked storage's, with their resourceVersions.
func (e *env) recordSecrets(name string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, sel := range []string{"owner=helm,name=" + name, "owner=" + release.ChunkedOwner + ",name=" + name} {
		list, err := suite.kube.CoreV1().Secrets(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			e.fatalf("oracle: neighbours: listing the records of %s: %v", name, err)
		}
		for _, s := range list.Items {
			out["Secret "+s.Name] = "resourceVersion " + s.ResourceVersion
		}
	}
	// Chunk Secrets carry the index Secret's key, not the release name.
	list, err := suite.kube.CoreV1().Secrets(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=" + release.ChunkedOwner + ",type=chunk"})
	if err != nil {
		e.fatalf("oracle: neighbours: listing chunk Secrets: %v", err)
	}
	for _, s := range list.Items {
		if strings.HasPrefix(s.Labels["key"], "sh.helm.release.v1."+name+".v") {
			out["Secret "+s.Name] = "resourceVersion " + s.ResourceVersion
		}
	}
	return out
}

// neighbourViolations compares the neighbours now with before: every one
// must still be there, as it was.
func (e *env) neighbourViolations(before neighbourSnapshot) []string {
	e.t.Helper()
	if len(before) == 0 {
		return nil
	}
	now := e.neighbourSnapshotOf(before)
	var bad []string
	for k, was := range before {
		switch is, ok := now[k]; {
		case !ok:
			bad = append(bad, fmt.Sprintf("safety: %s was deleted by a step that did not target it (it was: %s)", k, was))
		case is != was:
			bad = append(bad, fmt.Sprintf("safety: %s was changed by a step that did not target it: %s, now %s", k, was, is))
		}
	}
	sort.Strings(bad)
	return bad
}

// neighbourSnapshotOf takes the snapshot of the resources in before again,
// whatever state they are in now.
func (e *env) neighbourSnapshotOf(before neighbourSnapshot) neighbourSnapshot {
	now := neighbourSnapshot{}
	for k, v := range e.neighbourSnapshot(nil) {
		now[k] = v
	}
	// A neighbour unsettled now is left out of the snapshot: read what is
	// there of its records and resource directly.
	for k := range before {
		if _, ok := now[k]; ok || strings.Contains(k, ": ") {
			continue
		}
		kind, name, _ := strings.Cut(k, "/")
		for _, wk := range watchedKinds {
			if wk.kind != kind {
				continue
			}
			u, err := suite.dyn.Resource(wk.gvr).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			spec, _ := json.Marshal(u.Object["spec"])
			now[k] = fmt.Sprintf("uid %s, generation %d, spec %s, labels %v, finalizers %v (unsettled)", u.GetUID(), u.GetGeneration(),
				digestBytes(spec), u.GetLabels(), u.GetFinalizers())
			for rk, rv := range e.recordSecrets(name) {
				if _, ok := now[k+": "+rk]; !ok {
					now[k+": "+rk] = rv
				}
			}
		}
	}
	return now
}

func digestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
