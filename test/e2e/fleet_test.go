//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chaos tests (chaos_test.go) work on a fleet: fleetN resources of the
// test kind Hooked, each a release of one ConfigMap (chart
// internal/reconciler/testdata/charts/hooked with block: false), so that a
// hundred releases are cheap and their actions are Helm's own work, not a
// rollout's.

// fleetN is the size of a chaos test's fleet.
const fleetN = 100

// fleetDeadline bounds a fleet's convergence after its interruptions: a
// failure bound, not a timing requirement, generous for a hundred releases on
// a loaded 2-core machine.
const fleetDeadline = 4 * time.Minute

// fleetNames are the names of a fleet's resources.
func fleetNames(prefix string) []string {
	names := make([]string, fleetN)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return names
}

// applyFleet applies every resource of names in one kubectl apply, with
// spec.data.round = round: the first apply installs them all, a later one
// with another round upgrades them all.
func (e *env) applyFleet(names []string, round string) {
	e.t.Helper()
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "---\napiVersion: test.helmapp.io/v1\nkind: Hooked\nmetadata:\n  name: %s\nspec:\n  block: false\n  data:\n    round: %q\n", n, round)
	}
	e.apply("fleet-round-"+round, b.String())
}

// revision is one revision of a release as Helm stored it.
type revision struct {
	Version int    `json:"version"`
	Status  string `json:"status"`
	// Description is Helm's (or the operator's unlock's) account of it.
	Description string `json:"description"`
}

// storedRelease is what the tests read of a release record.
type storedRelease struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Info    struct {
		Status      string `json:"status"`
		Description string `json:"description"`
	} `json:"info"`
}

// histories reads every release history of the test's namespace from Helm's
// release Secrets (decoded as Helm stores them: base64 of gzipped JSON), by
// release name, oldest revision first.
func (e *env) histories(ctx context.Context) (map[string][]revision, error) {
	list, err := suite.kube.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return nil, err
	}
	out := map[string][]revision{}
	for _, s := range list.Items {
		raw, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", s.Name, err)
		}
		if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				return nil, fmt.Errorf("secret %s: %w", s.Name, err)
			}
			if raw, err = io.ReadAll(zr); err != nil {
				return nil, fmt.Errorf("secret %s: %w", s.Name, err)
			}
		}
		var rel storedRelease
		if err := json.Unmarshal(raw, &rel); err != nil {
			return nil, fmt.Errorf("secret %s: %w", s.Name, err)
		}
		out[rel.Name] = append(out[rel.Name], revision{Version: rel.Version, Status: rel.Info.Status, Description: rel.Info.Description})
	}
	for _, h := range out {
		sort.Slice(h, func(i, j int) bool { return h[i].Version < h[j].Version })
	}
	return out, nil
}

// mustHistories is histories or the test's failure.
func (e *env) mustHistories() map[string][]revision {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	h, err := e.histories(ctx)
	if err != nil {
		e.fatalf("reading Helm's release Secrets: %v", err)
	}
	return h
}

// interruptions records, by release, the revisions an interruption left
// pending: the test's own count of the actions it cut off, taken while no
// operator could write (a killed leader) or right before the fault.
type interruptions map[string]map[int]bool

// notePending adds every release of h whose latest revision is pending and
// returns how many there were.
func (in interruptions) notePending(h map[string][]revision) int {
	n := 0
	for name, revs := range h {
		last := revs[len(revs)-1]
		if !strings.HasPrefix(last.Status, "pending") {
			continue
		}
		n++
		if in[name] == nil {
			in[name] = map[int]bool{}
		}
		in[name][last.Version] = true
	}
	return n
}

// total is the number of interrupted actions recorded.
func (in interruptions) total() int {
	n := 0
	for _, revs := range in {
		n += len(revs)
	}
	return n
}

// countAt counts the releases of h whose latest revision is at least
// version and deployed: the actions of a burst done.
func countAt(h map[string][]revision, version int) int {
	n := 0
	for _, revs := range h {
		if last := revs[len(revs)-1]; last.Version >= version && last.Status == "deployed" {
			n++
		}
	}
	return n
}

// fleetBound is what a fleet's histories are checked against once it has
// converged: each release may have at most needed revisions plus extra(name)
// (the interruptions the test made that could have cost it one), and the
// fleet at most len(names)*needed + extraTotal.
type fleetBound struct {
	needed     int
	extra      func(name string) int
	extraTotal int
	// why states the bound in the failure message.
	why string
}

// waitFleetConverged waits until every resource of names is Ready and not
// Reconciling at its generation, then checks what Helm stored: each release
// has exactly one deployed revision, the one status.deployedRelease names,
// none pending, no more revisions than b allows, and its ConfigMap carries
// round. It returns the histories.
func (e *env) waitFleetConverged(names []string, round string, b fleetBound) map[string][]revision {
	e.t.Helper()
	deployed := map[string]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), fleetDeadline)
	defer cancel()
	last := ""
	for {
		if err := e.op.exited(); err != nil {
			e.fatalf("waiting for %d resources to be Ready: %v", len(names), err)
		}
		ok, obs := e.fleetReady(ctx, names, deployed)
		if ok {
			break
		}
		last = obs
		select {
		case <-ctx.Done():
			e.fatalf("waiting for %d resources to be Ready and not Reconciling at their generation: not within %s; last seen: %s", len(names), fleetDeadline, last)
		case <-time.After(pollInterval):
		}
	}

	h := e.mustHistories()
	total := 0
	for _, name := range names {
		revs := h[name]
		total += len(revs)
		var dep []int
		for _, r := range revs {
			if strings.HasPrefix(r.Status, "pending") {
				e.t.Errorf("%s: revision %d is still %s; history %v", name, r.Version, r.Status, revs)
			}
			if r.Status == "deployed" {
				dep = append(dep, r.Version)
			}
		}
		if len(dep) != 1 || int64(dep[0]) != deployed[name] {
			e.t.Errorf("%s: deployed revisions %v, status.deployedRelease.revision %d; want exactly one, the same; history %v", name, dep, deployed[name], revs)
		}
		if max := b.needed + b.extra(name); len(revs) > max {
			e.t.Errorf("%s: %d revisions, more than %d (%s); history %v", name, len(revs), max, b.why, revs)
		}
	}
	if max := len(names)*b.needed + b.extraTotal; total > max {
		e.t.Errorf("%d revisions in all, more than %d (%s)", total, max, b.why)
	}
	e.t.Logf("%d resources Ready; %d revisions in all for %d actions needed (bound %d: %s); failed revisions %d",
		len(names), total, len(names)*b.needed, len(names)*b.needed+b.extraTotal, b.why, countStatus(h, "failed"))

	cms, err := suite.kube.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance"})
	if err != nil {
		e.fatalf("listing the releases' ConfigMaps: %v", err)
	}
	got := map[string]string{}
	for _, cm := range cms.Items {
		got[cm.Name] = cm.Data["round"]
	}
	for _, name := range names {
		if got[name] != round {
			e.t.Errorf("ConfigMap %s says round %q, want %q: the release does not carry the spec", name, got[name], round)
		}
	}
	return h
}

// fleetReady reports whether every resource of names is Ready and not
// Reconciling at its generation, recording each one's
// status.deployedRelease.revision in deployed; else it describes the first
// few that are not.
func (e *env) fleetReady(ctx context.Context, names []string, deployed map[string]int64) (bool, string) {
	list, err := suite.dyn.Resource(hookedGVR).Namespace(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		byName[list.Items[i].GetName()] = &list.Items[i]
	}
	var notReady []string
	for _, name := range names {
		u := byName[name]
		if u == nil {
			notReady = append(notReady, name+": not found")
			continue
		}
		n := &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		rev, _, _ := unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision")
		deployed[name] = rev
		if !n.is(typeReady, metav1.ConditionTrue) || n.is(typeReconciling, metav1.ConditionTrue) {
			notReady = append(notReady, name+": "+n.String())
		}
	}
	if len(notReady) == 0 {
		return true, ""
	}
	shown := notReady[:min(3, len(notReady))]
	return false, fmt.Sprintf("%d of %d not yet, e.g.\n%s", len(notReady), len(names), strings.Join(shown, "\n"))
}

// countStatus counts the revisions of h with status st.
func countStatus(h map[string][]revision, st string) int {
	n := 0
	for _, revs := range h {
		for _, r := range revs {
			if r.Status == st {
				n++
			}
		}
	}
	return n
}
