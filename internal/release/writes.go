package release

import (
	"sync"
	"time"
)

// writeMemory is how long a write of this process to Helm's storage is
// remembered for the watch event it causes, and a verdict on an event for
// the other watches that see the same event. Events come within
// milliseconds; an event later than this is taken for someone else's write,
// which costs one reconcile that finds nothing to do.
const writeMemory = 2 * time.Minute

// Writes remembers the writes this process made to Helm's storage (the
// release records, Secrets named sh.helm.release.v1.<name>.v<revision>), so
// that the watch on that storage tells a record written by someone else (the
// helm CLI, a person, another process) from one this process wrote: only the
// former wakes a resource. One is shared by the storage drivers of every
// action and by every reconciler of the process.
//
// A write is remembered as the record's namespace, name and the status Helm
// labels it with (empty for a deletion) before it is sent, so that its event
// can never arrive first. The event of a write carries the same three: it
// is this process' own, and it consumes the write. A verdict is kept for
// the record's version, since every kind's watch sees the same event.
type Writes struct {
	mu       sync.Mutex
	writes   map[recordWrite][]time.Time
	verdicts map[recordVersion]verdict
	swept    time.Time
	now      func() time.Time
}

type recordWrite struct{ namespace, name, status string }

type recordVersion struct{ namespace, name, resourceVersion string }

type verdict struct {
	own bool
	at  time.Time
}

// NewWrites returns an empty memory of writes.
func NewWrites() *Writes {
	return &Writes{writes: map[recordWrite][]time.Time{}, verdicts: map[recordVersion]verdict{}, now: time.Now}
}

// Wrote records that this process is about to write the release record
// name in namespace with the status label status ("" for a deletion).
func (w *Writes) Wrote(namespace, name, status string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	w.sweep(now)
	k := recordWrite{namespace, name, status}
	w.writes[k] = append(w.writes[k], now)
}

// Own tells whether the event of the release record name in namespace, at
// resourceVersion and with the status label status ("" for a deletion), is
// one of this process' writes. The same event asked again gets the same
// answer. A nil Writes knows no write: every event is someone else's.
func (w *Writes) Own(namespace, name, resourceVersion, status string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	w.sweep(now)
	v := recordVersion{namespace, name, resourceVersion}
	if d, ok := w.verdicts[v]; ok {
		return d.own
	}
	k := recordWrite{namespace, name, status}
	own := len(w.writes[k]) > 0
	if own {
		if w.writes[k] = w.writes[k][1:]; len(w.writes[k]) == 0 {
			delete(w.writes, k)
		}
	}
	w.verdicts[v] = verdict{own: own, at: now}
	return own
}

// sweep forgets what is older than writeMemory, at most every writeMemory/4.
func (w *Writes) sweep(now time.Time) {
	if now.Sub(w.swept) < writeMemory/4 {
		return
	}
	w.swept = now
	for k, ts := range w.writes {
		i := 0
		for i < len(ts) && now.Sub(ts[i]) > writeMemory {
			i++
		}
		if i == len(ts) {
			delete(w.writes, k)
		} else {
			w.writes[k] = ts[i:]
		}
	}
	for k, d := range w.verdicts {
		if now.Sub(d.at) > writeMemory {
			delete(w.verdicts, k)
		}
	}
}
