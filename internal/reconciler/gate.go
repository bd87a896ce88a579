package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// retryGate holds back the retry of a failed resource until its backoff has
// passed, whatever event wakes the controller in between (a change to one of
// the release's objects, a resync): only a new generation — a changed spec or
// a deletion — goes through at once. It lives in memory; a restarted operator
// retries once straight away.
type retryGate struct {
	mu  sync.Mutex
	due map[types.UID]retryAt
}

type retryAt struct {
	generation int64
	at         time.Time
}

// wait returns how long the resource must still wait, 0 when it may go.
func (g *retryGate) wait(uid types.UID, generation int64, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.due[uid]
	if !ok || r.generation != generation || !now.Before(r.at) {
		return 0
	}
	return r.at.Sub(now)
}

// hold records a failure of generation to be retried after delay.
func (g *retryGate) hold(uid types.UID, generation int64, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.due == nil {
		g.due = map[types.UID]retryAt{}
	}
	g.due[uid] = retryAt{generation: generation, at: at}
}

// release forgets the resource after a success or its deletion.
func (g *retryGate) release(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.due, uid)
}
