package release

import (
	"errors"
	"maps"
	"strconv"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
)

// A settled release is one whose latest revision is deployed, this
// resource's own, of the watch's chart and in the resource's shard, and no
// newer than what the resource's status names and this process wrote. Most
// reconciles of a fleet are of settled releases: periodic ones, those after
// a restart, those an annotation starts. They need the latest revision only
// (State{Latest: it, Deployed: it} is what Observe would return), and of
// it what the decision, the drift check and readiness read: its values,
// manifest, chart metadata, status and labels.
//
// Memo keeps that revision of each release in memory, keyed by the name and
// resourceVersion of its record (the Secret) as the metadata cache of
// Helm's release records shows them. A reconcile that finds the same record
// at the same resourceVersion in the cache reads nothing from the API
// server; any write to the record (by anyone: a helm CLI, another process,
// this one) changes its resourceVersion, and a new revision is a new record,
// so what the memo answers is never older than what the cache shows.

// Record is what the metadata cache shows of one release record: its
// Secret's name (Helm's storage key), resourceVersion and labels.
type Record struct {
	Key, ResourceVersion string
	Labels               map[string]string
}

// Memo holds the settled revision of each release (namespace/name), at most
// one per release. It is shared by the reconcilers of a process; Forget
// drops a release whose resource went away.
type Memo struct {
	mu sync.Mutex
	m  map[string]memoEntry

	// load, when set, lists a namespace's deployed records on the first
	// miss there (preload.go); loadFailed is told of a list that failed.
	load       Loader
	loadFailed func(ns string, err error)
	pre        map[string]*preload
}

type memoEntry struct {
	key, resourceVersion string
	rel                  *release.Release
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{m: map[string]memoEntry{}, pre: map[string]*preload{}} }

// NewPreloadingMemo returns an empty memo that, on its first miss in a
// namespace, lists the namespace's deployed records with load (see
// preload.go); failed, when not nil, is told of a list that failed.
func NewPreloadingMemo(load Loader, failed func(ns string, err error)) *Memo {
	m := NewMemo()
	m.load, m.loadFailed = load, failed
	return m
}

// Forget drops what the memo holds of release ns/name.
func (m *Memo) Forget(ns, name string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, ns+"/"+name)
	if p := m.pre[ns]; p != nil {
		delete(p.byRelease, name)
	}
}

// Len is the number of releases the memo holds.
func (m *Memo) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// get is the revision of release ns/name that the memo holds at Secret key
// and resourceVersion rv, or else, with preload, that the namespace's
// preload found there (nil for none).
func (m *Memo) get(ns, name, key, rv string, preload bool) *release.Release {
	m.mu.Lock()
	e, ok := m.m[ns+"/"+name]
	m.mu.Unlock()
	if ok && e.key == key && e.resourceVersion == rv {
		return copyRelease(e.rel)
	}
	if !preload {
		return nil
	}
	return m.preloaded(ns, name, key, rv)
}

func (m *Memo) put(release, key, rv string, rel *release.Release) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[release] = memoEntry{key: key, resourceVersion: rv, rel: rel}
}

// ObserveSettled is Observe for a release that records (the metadata
// cache's records of the release) show settled: its latest revision comes
// from memo when the memo holds it at the resourceVersion the cache shows,
// or its namespace's preload listed it there (no request of its own; see
// preload.go), else it is read alone (one Get of its record) and
// remembered. Whatever is not settled — no record, a latest revision not
// deployed (pending, failed, uninstalled), newer than the status and this
// process know (foreign, or the cache behind this process' writes),
// adoptable, of another chart or shard, or a read that fails — is observed
// as before, by Observe, which reads the whole history. fromMemo reports an
// answer that needed no request.
//
// The revision kept and returned carries its chart's metadata only, not its
// templates or files: nothing settled reads them, and nothing settled
// writes the revision back (a settled release needs no adoption, no
// resharding and no unlock).
func (r *Runner) ObserveSettled(records []Record, memo *Memo) (st State, fromMemo bool, err error) {
	if len(records) == 0 && memo != nil && r.observeNone() {
		return State{}, true, nil
	}
	latest, version, ok := latestRecord(records)
	if memo == nil || !ok || latest.Labels["status"] != release.StatusDeployed.String() ||
		version > r.known() || (r.Actions != nil && r.Actions.Wrote(r.Namespace, r.Name, r.Owner.UID) > version) {
		st, err := r.Observe()
		return st, false, err
	}
	id := r.Namespace + "/" + r.Name
	// A revision this process wrote was read back after its action: the
	// namespace's list is for those it found (after a restart).
	preload := r.Actions == nil || r.Actions.Wrote(r.Namespace, r.Name, r.Owner.UID) < version
	if rel := memo.get(r.Namespace, r.Name, latest.Key, latest.ResourceVersion, preload); rel != nil && r.settled(rel, version) {
		return State{Latest: rel, Deployed: rel, Trimmed: true}, true, nil
	}
	if cfg := r.Client.Config(); cfg != nil && cfg.Releases != nil {
		rel, err := cfg.Releases.Get(r.Name, version)
		if err == nil && r.settled(rel, version) {
			kept := trimmed(rel)
			memo.put(id, latest.Key, latest.ResourceVersion, kept)
			c := copyRelease(kept)
			return State{Latest: c, Deployed: c, Trimmed: true}, false, nil
		}
	}
	memo.Forget(r.Namespace, r.Name)
	st, err = r.Observe()
	return st, false, err
}

// settled tells whether rel, read as the latest revision version, is
// settled for the runner (see ObserveSettled).
func (r *Runner) settled(rel *release.Release, version int) bool {
	if rel == nil || rel.Info == nil || rel.Info.Status != release.StatusDeployed || rel.Version != version || rel.Chart == nil {
		return false
	}
	if c, _ := ClaimOf(State{Latest: rel}, r.Owner, r.Chart.Metadata.Name); c != ClaimOwned {
		return false
	}
	return !r.Shard.differs(rel.Labels) && rel.Labels[LabelChartDigest] == r.ChartDigest
}

// latestRecord is the record of records with the highest version label.
func latestRecord(records []Record) (Record, int, bool) {
	var latest Record
	version := 0
	for _, rec := range records {
		v, err := strconv.Atoi(rec.Labels["version"])
		if err == nil && v > version {
			latest, version = rec, v
		}
	}
	return latest, version, version > 0
}

// trimmed is rel without what no settled reconcile reads: the chart's
// templates, files, schema and default values, and the hooks.
func trimmed(rel *release.Release) *release.Release {
	t := *rel
	t.Chart = &chart.Chart{Metadata: rel.Chart.Metadata}
	t.Hooks = nil
	return &t
}

// copyRelease is a copy of rel that its user may change (labels, info)
// without changing the memo's.
func copyRelease(rel *release.Release) *release.Release {
	c := *rel
	c.Labels = maps.Clone(rel.Labels)
	if rel.Info != nil {
		info := *rel.Info
		c.Info = &info
	}
	return &c
}

// NoHistoryAssumer is a release storage driver that can take a release to
// have no record without listing its history: AssumeNoHistory tells it so,
// and reports whether it will answer the history from that (the operator's
// own Secrets driver under its memo does; another driver, or one wrapped
// for tests, does not, and the history is listed).
type NoHistoryAssumer interface {
	AssumeNoHistory(name string) bool
}

// errAssumedWrong is Run's answer when an install or upgrade was refused
// because the revision it was to write exists: from an assumed empty
// history (see observeNone), or from a view someone wrote past since
// (refusedAsStale).
var errAssumedWrong = errors.New("the release has a record the pass did not see")

// observeNone takes the release to have no record, without a request, when
// the metadata cache of release records shows none (ObserveSettled's
// records are empty), the resource's status names no revision and this
// process wrote none (a record it wrote may not be in the cache yet), and
// the storage driver can answer the history from that (NoHistoryAssumer).
//
// A cache behind the API server is caught: the plan is then an install,
// and Helm's install creates its revision 1 record (a fixed name) before it
// applies anything; a record someone else created meanwhile makes that
// create fail as existing, and Run returns errAssumedWrong, on which the
// pass observes again with a list and goes on — no failure is reported,
// no revision is written. What the create does not catch is a history
// whose revision 1 is gone (pruned by Helm's MaxHistory) written entirely
// while the cache lagged: more writes than the history keeps, unseen by a
// watch.
func (r *Runner) observeNone() bool {
	if r.known() != 0 {
		return false
	}
	cfg := r.Client.Config()
	if cfg == nil || cfg.Releases == nil {
		return false
	}
	a, ok := cfg.Releases.Driver.(NoHistoryAssumer)
	if !ok || !a.AssumeNoHistory(r.Name) {
		return false
	}
	r.assumedNone = true
	return true
}
