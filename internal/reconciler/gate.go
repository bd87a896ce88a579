package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// retryGate holds back the retry of a failed resource until its backoff has
// passed, whatever event wakes the controller in between (a change to one of
// the release's objects, the operator's own status or finalizer write, a
// resync, an unrelated annotation): only a new generation — a changed spec or
// a deletion — or a new value of the retry annotation goes through at once.
// A resource out of retries is held until one of those. It lives in memory;
// a restarted operator retries once straight away, within the budget the
// status persists.
type retryGate struct {
	mu  sync.Mutex
	due map[types.UID]retryAt
	// pending holds the statuses that could not be written (keepUnwritten).
	pending map[types.UID]unwrittenStatus
}

type retryAt struct {
	generation int64
	// retry is the value of the retry annotation when the failure happened.
	retry string
	// at is when the retry may go; zero means never (out of retries).
	at time.Time
}

// wait reports whether the resource must still wait, and for how long; the
// duration is 0 for a resource held until it changes.
func (g *retryGate) wait(uid types.UID, generation int64, retry string, now time.Time) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.due[uid]
	switch {
	case !ok || r.generation != generation || r.retry != retry:
		return false, 0
	case r.at.IsZero():
		return true, 0
	case !now.Before(r.at):
		return false, 0
	}
	return true, r.at.Sub(now)
}

// hold records a failure of generation, under the retry annotation value
// retry, to be retried at at; the zero time holds it until it changes.
func (g *retryGate) hold(uid types.UID, generation int64, retry string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.due == nil {
		g.due = map[types.UID]retryAt{}
	}
	g.due[uid] = retryAt{generation: generation, retry: retry, at: at}
}

// release forgets the resource after a success or its deletion.
func (g *retryGate) release(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.due, uid)
}

// unwrittenStatus is a status a reconcile computed but could not write.
type unwrittenStatus struct {
	generation int64
	status     status.Status
}

// keepUnwritten remembers the status of generation that could not be
// written. The next reconcile of that generation starts from it and writes
// it, even when the gate holds that reconcile back: a failed status write
// is retried soon, whatever the backoff.
func (g *retryGate) keepUnwritten(uid types.UID, generation int64, s status.Status) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[types.UID]unwrittenStatus{}
	}
	g.pending[uid] = unwrittenStatus{generation: generation, status: *s.DeepCopy()}
}

// unwritten returns the status of generation that could not be written.
func (g *retryGate) unwritten(uid types.UID, generation int64) (status.Status, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.pending[uid]
	if !ok || p.generation != generation {
		return status.Status{}, false
	}
	return *p.status.DeepCopy(), true
}

// forgetUnwritten drops it once a status was written.
func (g *retryGate) forgetUnwritten(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pending, uid)
}
