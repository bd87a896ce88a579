//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// specSecret is a value tests place in specs, for the oracle to find in no
// status, event or log (oracleOptions.secrets).
const specSecret = "spec-secret-4f1d9c"

// oracleOptions say what the oracle expects of the test's resources beyond
// what it expects of every resource.
type oracleOptions struct {
	// secrets are strings the test placed in specs: none may appear in a
	// resource's status, an event or an operator log.
	secrets []string
	// stalled names the resources ("Kind/name") whose spec cannot be
	// installed: they must settle Stalled=True instead of Ready=True.
	stalled []string
	// gone names releases that must have no record left (uninstalled).
	gone []string
	// bound is the liveness bound: every resource settles within it after
	// the check begins; deadline when zero.
	bound time.Duration
}

// watchedKinds are the kinds the suite's operators watch; the oracle checks
// every resource of each in the test's namespace (a kind whose CRD is not
// installed has none).
var watchedKinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{"Nginx", nginxGVR},
	{"Echo", schema.GroupVersionResource{Group: "web.helmapp.io", Version: "v1alpha1", Resource: "echoes"}},
	{"Hooked", hookedGVR},
	{"Bulky", testedGVR},
}

// checkOracle checks what the operator promises of every resource of the
// watched kinds in the test's namespace, whatever path led there (issue 28),
// and fails the test with every violation found:
//
//   - liveness: within o.bound every resource is settled — its status
//     describes its generation, it is not Reconciling, it is Ready (Stalled
//     for o.stalled), none of its release's revisions is pending — and the
//     releases of o.gone have no record; no object of its deployed
//     revision contradicts its Ready=True (gone, or not Current: the status
//     has not yet caught up with a change to the cluster, notCaughtUp); a
//     second later it still is;
//   - safety: no revision pending for longer than pendingGrace unless an
//     action of a live operator holds it (unheldPending, oracle_live_test.go);
//     at most one deployed revision (in Helm's records, and as the
//     helm CLI lists them); every record of a release names its owner's
//     kind and uid, every object of its deployed revision carries the
//     operator's label and an owner reference to it; a resource claims no
//     release of another; no string of o.secrets in a status, an event or an
//     operator log;
//   - truth: observedGeneration is the generation; deployedRelease names the
//     revision Helm has deployed, with its chart, status and the digests of
//     its values and manifest computed here from Helm's record (none when
//     nothing is deployed); Ready=True only if that revision carries the
//     spec and every object of it is Current; Stalled and Ready never both
//     True; a failed release names a revision Helm has.
func (e *env) checkOracle(o oracleOptions) {
	e.t.Helper()
	if o.bound == 0 {
		o.bound = deadline
	}
	start := time.Now()
	var snap []*oracleResource
	pending := newPendingWatch()
	for {
		// An operator killed at its crash point is restarted (crash_test.go).
		if err := e.op.exited(); err != nil && !e.restartIfCrashed() {
			e.fatalf("oracle: %v", err)
		}
		var unsettled []string
		var err error
		snap, err = e.oracleSnapshot()
		if err == nil {
			unsettled = e.unsettled(snap, o)
			if len(unsettled) == 0 {
				unsettled = e.notCaughtUp(snap)
			}
			if bad := e.unheldPending(pending, snap); len(bad) > 0 {
				e.fatalf("oracle: %s", strings.Join(bad, "\n  "))
			}
		} else {
			unsettled = []string{err.Error()}
		}
		if len(unsettled) == 0 {
			break
		}
		if time.Since(start) > o.bound {
			e.fatalf("oracle: liveness: not settled within %s:\n  %s", o.bound, strings.Join(unsettled, "\n  "))
		}
		time.Sleep(pollInterval)
	}
	settled := time.Since(start)
	// Settled means quiet: nothing reconciles again a moment later.
	time.Sleep(time.Second)
	snap, err := e.oracleSnapshot()
	if err != nil {
		e.fatalf("oracle: %v", err)
	}
	var bad []string
	for _, s := range e.unsettled(snap, o) {
		bad = append(bad, "liveness: settled, then not a second later: "+s)
	}
	bad = append(bad, e.oracleViolations(snap, o)...)
	if len(bad) > 0 {
		e.fatalf("oracle: %d violation(s):\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	e.t.Logf("oracle: %d resource(s) settled in %.1fs, every check held", len(snap), settled.Seconds())
}

// notCaughtUp names each resource whose Ready=True the cluster already
// contradicts: an object of its deployed revision gone or not Current. A
// status follows the cluster by an event and a reconcile, so right after a
// step changed an object (a Deployment scaled by hand, a ConfigMap deleted)
// the old Ready=True is not yet settled, whatever its conditions say: the
// oracle waits for the operator to see the change rather than judge the
// status it wrote before. One that never catches up fails the liveness bound;
// one Ready=True against the cluster a second after settling is still a
// truth violation (resourceViolations).
func (e *env) notCaughtUp(snap []*oracleResource) []string {
	mapper, err := e.restMapper()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, r := range snap {
		if !r.n.is(typeReady, metav1.ConditionTrue) {
			continue
		}
		deployed := r.deployedRecord()
		if deployed == nil {
			continue
		}
		objs, err := manifestObjects(deployed.Manifest)
		if err != nil {
			continue // resourceViolations reports it
		}
		for _, obj := range objs {
			for _, v := range e.objectViolations(obj, deployed, string(r.u.GetUID()), true, mapper) {
				if strings.HasPrefix(v, "truth: Ready=True, but ") {
					out = append(out, fmt.Sprintf("%s: status not caught up with the cluster: %s", r.key, strings.TrimPrefix(v, "truth: ")))
				}
			}
		}
	}
	return out
}

// oracleResource is one resource as the oracle sees it, with Helm's records
// of the release of its name.
type oracleResource struct {
	key string // Kind/name
	u   *unstructured.Unstructured
	n   *nginx
	// deployed is status.deployedRelease, nil when absent.
	deployed *struct {
		Revision       int    `json:"revision"`
		Chart          string `json:"chart"`
		ChartVersion   string `json:"chartVersion"`
		Status         string `json:"status"`
		ValuesDigest   string `json:"valuesDigest"`
		ManifestDigest string `json:"manifestDigest"`
	}
	failedRevision int
	// records are Helm's records of the release, oldest first; plain those
	// of Helm's own driver (the helm CLI's).
	records, plain []*helmrelease.Release
}

// deployedRecord is the last of r's Helm records marked deployed, nil when none is.
func (r *oracleResource) deployedRecord() *helmrelease.Release {
	var out *helmrelease.Release
	for _, rec := range r.records {
		if rec.Info != nil && rec.Info.Status == helmrelease.StatusDeployed {
			out = rec
		}
	}
	return out
}

// oracleSnapshot reads every resource of the watched kinds with its
// release's records, and the records of the releases that should be gone.
func (e *env) oracleSnapshot() ([]*oracleResource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var out []*oracleResource
	for _, k := range watchedKinds {
		list, err := suite.dyn.Resource(k.gvr).Namespace(e.ns).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue // the kind's CRD is not installed
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.gvr.Resource, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			r := &oracleResource{key: k.kind + "/" + u.GetName(), u: u, n: &nginx{}}
			if err := fromUnstructured(u, r.n); err != nil {
				return nil, err
			}
			var st struct {
				Status struct {
					DeployedRelease json.RawMessage `json:"deployedRelease"`
					FailedRelease   struct {
						Revision int `json:"revision"`
					} `json:"failedRelease"`
				} `json:"status"`
			}
			if err := fromUnstructured(u, &st); err != nil {
				return nil, err
			}
			if len(st.Status.DeployedRelease) > 0 && string(st.Status.DeployedRelease) != "null" {
				r.deployed = &struct {
					Revision       int    `json:"revision"`
					Chart          string `json:"chart"`
					ChartVersion   string `json:"chartVersion"`
					Status         string `json:"status"`
					ValuesDigest   string `json:"valuesDigest"`
					ManifestDigest string `json:"manifestDigest"`
				}{}
				if err := json.Unmarshal(st.Status.DeployedRelease, r.deployed); err != nil {
					return nil, err
				}
			}
			r.failedRevision = st.Status.FailedRelease.Revision
			if r.records, r.plain, err = e.releaseRecords(u.GetName()); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// releaseRecords reads release name's records as Helm's drivers decode
// them, from Helm's Secrets (plain) and from the chunked storage (storage:
// chunked), all of them oldest first.
func (e *env) releaseRecords(name string) (all, plain []*helmrelease.Release, err error) {
	plain, err = storage.Init(driver.NewSecrets(suite.kube.CoreV1().Secrets(e.ns))).History(name)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil, fmt.Errorf("reading the records of release %s: %w", name, err)
	}
	chunked, err := e.chunkedStorage().History(name)
	if err != nil && !strings.Contains(err.Error(), driver.ErrReleaseNotFound.Error()) {
		return nil, nil, fmt.Errorf("reading the chunked records of release %s: %w", name, err)
	}
	all = append(append(all, plain...), chunked...)
	sort.Slice(all, func(i, j int) bool { return all[i].Version < all[j].Version })
	return all, plain, nil
}

// unsettled says why the resources are not settled yet, nothing when they
// are.
func (e *env) unsettled(snap []*oracleResource, o oracleOptions) []string {
	var out []string
	for _, r := range snap {
		n := r.n
		var why []string
		if r.u.GetDeletionTimestamp() != nil {
			why = append(why, "being deleted")
		}
		if n.Status.ObservedGeneration != n.Metadata.Generation {
			why = append(why, fmt.Sprintf("observedGeneration %d, generation %d", n.Status.ObservedGeneration, n.Metadata.Generation))
		}
		if c := n.cond(typeReconciling); c != nil && c.Status == metav1.ConditionTrue {
			why = append(why, "Reconciling=True "+c.Reason)
		}
		want := typeReady
		for _, s := range o.stalled {
			if s == r.key {
				want = typeStalled
			}
		}
		if !n.is(want, metav1.ConditionTrue) {
			why = append(why, "not "+want+"=True at its generation")
		}
		for _, rec := range r.records {
			if rec.Info != nil && rec.Info.Status.IsPending() {
				why = append(why, fmt.Sprintf("revision %d %s", rec.Version, rec.Info.Status))
			}
		}
		if len(why) > 0 {
			out = append(out, fmt.Sprintf("%s: %s\n%s", r.key, strings.Join(why, "; "), n))
		}
	}
	for _, name := range o.gone {
		recs, _, err := e.releaseRecords(name)
		if err != nil {
			out = append(out, err.Error())
		} else if len(recs) > 0 {
			out = append(out, fmt.Sprintf("release %s: %d record(s) left, want none (uninstalled)", name, len(recs)))
		}
	}
	return out
}
