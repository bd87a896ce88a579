package release

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Actions is the registry of the Helm actions this process is running, by
// release (namespace/name). One registry is shared by every reconciler of the
// process, so that a pending lock one of them holds is never taken for stale.
type Actions struct {
	mu      sync.Mutex
	running map[string]*runningAction
	// seen is the newest generation the primary watch saw of each
	// resource (see Supersede).
	seen map[types.UID]int64
	// ended is when the last action of this process on a release ended,
	// and wrote the newest revision an action of this process left on a
	// release, as read back after it. Both are by release (namespace/name)
	// and remember the resource (UID) they were for: a resource deleted and
	// created again under its name is another resource, which inherits
	// neither (Forget drops them when the primary watch sees the deletion;
	// the UID covers a deletion it never saw).
	ended map[string]endedAt
	wrote map[string]wroteRevision
	// observer is told the duration and outcome of every Helm action; nil: nobody.
	observer ActionObserver
}

// ActionObserver is told that a Helm action (install, upgrade, rollback,
// uninstall, test) of a release of a resource of kind took d and ended with err
// (nil on success). internal/metrics implements it.
type ActionObserver func(kind, action string, d time.Duration, err error)

// ObserveWith makes the registry tell f about every Helm action; call it
// before the registry is used.
func (a *Actions) ObserveWith(f ActionObserver) { a.observer = f }

// observed tells the observer, if any, that act began at start and ended with err.
func (a *Actions) observed(kind, act string, start time.Time, err error) {
	if a != nil && a.observer != nil {
		a.observer(kind, act, time.Since(start), err)
	}
}

// NewActions returns an empty registry.
func NewActions() *Actions {
	return &Actions{running: map[string]*runningAction{}, seen: map[types.UID]int64{}, ended: map[string]endedAt{}, wrote: map[string]wroteRevision{}}
}

// endedAt is when the last action of resource uid on a release ended.
type endedAt struct {
	uid types.UID
	at  time.Time
}

// wroteRevision is the newest revision an action of resource uid left on
// a release, and the digest of its manifest (Digest): a record of that
// revision whose manifest is another was rewritten since (trust.go).
type wroteRevision struct {
	uid            types.UID
	revision       int
	manifestDigest string
}

// begin records that act runs on release ns/name for generation gen of
// the resource uid; end ends it. An action begun for a generation older than
// the newest the primary watch saw is superseded from the start (see
// Supersede).
func (a *Actions) begin(ns, name, act string, uid types.UID, gen int64) *runningAction {
	ra := &runningAction{act: act, uid: uid, gen: gen, preempt: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running[ns+"/"+name] = ra
	if uid != "" {
		ra.supersede(a.seen[uid])
	}
	return ra
}

// beginTest records that a test run (ActionTest) runs on release ns/name
// for generation gen of the resource uid, preemptible as begin's actions
// are. A test run writes no revision and holds no lock: Running does not
// report it, and its end is not an action's end for EndedAt.
func (a *Actions) beginTest(ns, name string, uid types.UID, gen int64) *runningAction {
	ra := a.begin(ns, name, ActionTest, uid, gen)
	a.mu.Lock()
	defer a.mu.Unlock()
	ra.noLock = true
	return ra
}

// wroteNothing marks the action ra as one that wrote no revision and holds
// no lock (an install refused at its first write, see observeNone): its
// end is not an action's end for EndedAt, so that a pending revision
// someone else wrote meanwhile is not taken for one it left.
func (a *Actions) wroteNothing(ra *runningAction) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ra.noLock = true
}

// track records that act, which no generation preempts (an uninstall, a
// rollback), runs on release ns/name of the resource uid; the returned
// function ends it.
func (a *Actions) track(ns, name string, uid types.UID, act string) (end func()) {
	// Generation 0: no generation preempts it (runningAction.supersede).
	ra := a.begin(ns, name, act, uid, 0)
	return func() { a.end(ns, name, ra) }
}

// end records that the action ra on release ns/name ended.
func (a *Actions) end(ns, name string, ra *runningAction) {
	key := ns + "/" + name
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running[key] == ra {
		delete(a.running, key)
	}
	if !ra.noLock {
		a.ended[key] = endedAt{uid: ra.uid, at: time.Now()}
	}
}

// EndedAt is when the last action of this process on release ns/name of the
// resource uid ended, the zero time when none did. A pending revision written before then was
// written by that action (or an earlier one), which ended without recording
// its outcome — the API server was unreachable at the end, say — and nobody
// runs it any more.
func (a *Actions) EndedAt(ns, name string, uid types.UID) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.ended[ns+"/"+name]; ok && e.uid == uid {
		return e.at
	}
	return time.Time{}
}

// Wrote is the newest revision an action of this process left on release
// ns/name of the resource uid, 0 for none.
func (a *Actions) Wrote(ns, name string, uid types.UID) int {
	rev, _ := a.wroteDigest(ns, name, uid)
	return rev
}

// wroteDigest is Wrote and the digest of that revision's manifest.
func (a *Actions) wroteDigest(ns, name string, uid types.UID) (int, string) {
	if a == nil {
		return 0, ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.wrote[ns+"/"+name]; ok && w.uid == uid {
		return w.revision, w.manifestDigest
	}
	return 0, ""
}

// noteWrote records that an action of this process for the resource uid
// left revision, whose manifest has digest manifestDigest, on release
// ns/name (Helm's storage read back after it).
func (a *Actions) noteWrote(ns, name string, uid types.UID, revision int, manifestDigest string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := ns + "/" + name
	if w, ok := a.wrote[key]; !ok || w.uid != uid || revision >= w.revision {
		a.wrote[key] = wroteRevision{uid: uid, revision: revision, manifestDigest: manifestDigest}
	}
}

// Running returns the action this process runs on release ns/name, "" for none.
func (a *Actions) Running(ns, name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ra := a.running[ns+"/"+name]; ra != nil && !ra.noLock {
		return ra.act
	}
	return ""
}

// Tenure is since when this process is the one reconciling: its start, then
// the moment it won leader election. A pending lock written before then was
// written by an operation of another process, which is not running it for
// this one.
type Tenure struct {
	mu    sync.Mutex
	since time.Time
}

// NewTenure returns a tenure that began at start.
func NewTenure(start time.Time) *Tenure { return &Tenure{since: start} }

// Begin moves the tenure's start to at (this process won leader election).
func (t *Tenure) Begin(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.since = at
}

// Since is when this process became the one reconciling.
func (t *Tenure) Since() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.since
}
