package rollout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// reservationTTL is how long a slot stays reserved after the upgrade that
// took it ended, when the caches never show the resource leave the waiting
// state (its reconcile stopped before Helm wrote anything, say). The caches
// catch up within moments; this only keeps a lost slot from being lost for
// good.
const reservationTTL = 30 * time.Second

// Config is what a Coordinator reads and tells.
type Config struct {
	// Chart is the chart the kind's resources run now, Budget the watch's rollout.
	Chart  Chart
	Budget Budget
	// List returns every resource of the kind as the caches hold them; it
	// must not call the API server.
	List func() ([]Resource, error)
	// Wake reconciles the resource key soon (its controller's queue).
	Wake func(key types.NamespacedName)
	// Event emits an event on the resource key; warning for a Warning.
	Event func(key types.NamespacedName, warning bool, reason, note string)
	// Observe is told the count of resources in each state at each
	// evaluation (the metric helmapp_rollout_resources); nil: nobody.
	Observe func(counts map[State]int)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Coordinator decides, for the resources of one kind, which may upgrade to
// the kind's chart now. Admit is safe for concurrent use by parallel
// reconciles: a slot is reserved under its lock before the upgrade starts.
type Coordinator struct {
	cfg  Config
	kick chan struct{}
	// active is true while a rollout may be under way; while false,
	// Changed costs nothing.
	active atomic.Bool

	mu sync.Mutex
	// reserved are the slots this process's upgrades took: running (zero
	// time) or ended at the time recorded, until the caches show them.
	reserved map[types.NamespacedName]time.Time
	// waiters asked and were told to wait.
	waiters map[types.NamespacedName]bool
	// started, halted: what the events said of the rollout so far; last
	// is the resource admitted last.
	started, halted bool
	last            types.NamespacedName
}

// New returns a Coordinator; run Start to wake waiting resources.
func New(cfg Config) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Coordinator{cfg: cfg, kick: make(chan struct{}, 1),
		reserved: map[types.NamespacedName]time.Time{}, waiters: map[types.NamespacedName]bool{}}
}

// Ticket is a slot taken by an admitted upgrade; Done gives it back.
type Ticket struct {
	c   *Coordinator
	key types.NamespacedName
}

// Done says the admitted upgrade ended; ran is false when no upgrade was
// attempted after all, and the slot is free at once. Otherwise it stays
// taken until the caches show the upgrade's outcome. A nil Ticket does nothing.
func (t *Ticket) Done(ran bool) {
	if t == nil {
		return
	}
	c := t.c
	c.mu.Lock()
	if ran {
		c.reserved[t.key] = c.cfg.Now()
		// Counted again once the reservation expires, should the caches
		// never show the upgrade's outcome: nothing else would wake the
		// resources waiting for its slot.
		time.AfterFunc(reservationTTL+time.Second, c.Changed)
	} else {
		delete(c.reserved, t.key)
	}
	c.mu.Unlock()
	c.Changed()
}

// Admit decides whether the resource key, deployed on chart version from
// and asking to upgrade to the new chart only because the chart changed, may
// upgrade now. If so it returns the Ticket of its slot; if not, why it
// waits. An error is the caches' (not synced yet).
func (c *Coordinator) Admit(key types.NamespacedName, from string) (*Ticket, *status.RolloutWait, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := c.snapshot()
	if err != nil {
		return nil, nil, err
	}
	if !c.started {
		c.started = true
		c.cfg.Event(key, false, status.ReasonRolloutStarted, fmt.Sprintf(
			"Rollout of chart %s %s to %d resources of the kind started: %s (at most %d at a time)",
			c.cfg.Chart.Name, c.cfg.Chart.Version, snap.Total, c.cfg.Budget, c.cfg.Budget.Slots(snap.Total)))
	}
	c.active.Store(true)
	// A resource that failed on the new chart may try again: it holds its
	// place in the rollout already, and its success resumes a halted one.
	if at, ok := c.reserved[key]; (ok && at.IsZero()) || snap.StateOf(key) == StateFailed || snap.Admits(key) {
		c.reserved[key] = time.Time{}
		delete(c.waiters, key)
		c.last = key
		return &Ticket{c: c, key: key}, nil, nil
	}
	c.waiters[key] = true
	return nil, waitOf(snap, from), nil
}

// waitOf is a waiting resource's view of snap.
func waitOf(s Snapshot, from string) *status.RolloutWait {
	return &status.RolloutWait{Chart: s.Chart.Name, From: from, To: s.Chart.Version,
		Total: s.Total, Upgraded: s.Counts[StateUpgraded], InProgress: s.Counts[StateInProgress],
		Failed: s.Counts[StateFailed], Halted: s.Halted(), MaxFailures: s.Budget.MaxFailures, FailedNames: s.Failed}
}

// Changed says that a resource of the kind changed (its status, a release
// record): the rollout is evaluated again soon, once for many changes.
func (c *Coordinator) Changed() {
	if !c.active.Load() {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Start evaluates the rollout after changes until ctx ends: it wakes the
// resources that get the free slots, every waiting resource when the
// rollout halts or resumes (so that their condition says so), emits the
// rollout's events and updates the metric.
func (c *Coordinator) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
			c.evaluate()
		}
	}
}

func (c *Coordinator) evaluate() {
	// Woken outside the lock: parallel reconciles go on asking meanwhile.
	for _, k := range c.judge() {
		c.cfg.Wake(k)
	}
}

// judge counts the rollout again, emits the events its change calls for,
// and returns the resources to wake.
func (c *Coordinator) judge() []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := c.snapshot()
	if err != nil {
		return nil
	}
	if c.cfg.Observe != nil {
		c.cfg.Observe(snap.Counts)
	}
	halted := snap.Halted()
	var wake []types.NamespacedName
	switch {
	case halted && !c.halted:
		for _, f := range snap.Failed[:min(len(snap.Failed), 5)] {
			ns, name, _ := cutKey(f)
			c.cfg.Event(types.NamespacedName{Namespace: ns, Name: name}, true, status.ReasonRolloutHalted, fmt.Sprintf(
				"Rollout of chart %s %s halted: %d resources failed on it (rollout.maxFailures %d): %v; %d of %d upgraded; fix or retry them (annotation helmapp.io/retry) to resume",
				c.cfg.Chart.Name, c.cfg.Chart.Version, len(snap.Failed), c.cfg.Budget.MaxFailures, snap.Failed[:min(len(snap.Failed), 5)],
				snap.Counts[StateUpgraded], snap.Total))
		}
		wake = snap.Waiting()
	case !halted && c.halted:
		wake = snap.Waiting()
	default:
		wake = snap.Next()
	}
	c.halted = halted
	if c.started && !snap.Active() && snap.Counts[StateFailed] == 0 && len(c.reserved) == 0 {
		c.cfg.Event(c.last, false, status.ReasonRolloutCompleted, fmt.Sprintf(
			"Rollout of chart %s %s completed: all %d resources upgraded and Ready", c.cfg.Chart.Name, c.cfg.Chart.Version, snap.Total))
		c.started = false
		clear(c.waiters)
	}
	c.active.Store(snap.Active() || halted || len(c.reserved) > 0)
	return wake
}

// snapshot lists the resources and classifies them with the reservations,
// first dropping those the caches caught up with and those that expired.
// c.mu is held.
func (c *Coordinator) snapshot() (Snapshot, error) {
	rs, err := c.cfg.List()
	if err != nil {
		return Snapshot{}, err
	}
	now := c.cfg.Now()
	seen := map[types.NamespacedName]bool{}
	for _, r := range rs {
		seen[r.Key] = true
		at, ok := c.reserved[r.Key]
		if !ok || at.IsZero() {
			continue
		}
		if st := Classify(r, c.cfg.Chart); (st != StateWaiting && st != StateNone) || now.Sub(at) > reservationTTL {
			delete(c.reserved, r.Key)
		}
	}
	held := map[types.NamespacedName]bool{}
	for k, at := range c.reserved {
		if !seen[k] && !at.IsZero() {
			delete(c.reserved, k) // gone
			continue
		}
		held[k] = true
	}
	return NewSnapshot(rs, c.cfg.Chart, c.cfg.Budget, held), nil
}

func cutKey(k string) (ns, name string, ok bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return "", k, false
}
