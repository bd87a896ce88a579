package release

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Preemption: a new generation of a resource does not wait for the running
// action of an older one to time out when that action is only waiting — on a
// hook, or on Helm's wait for the release's objects. The primary watch tells
// the registry of every generation it sees (Supersede); a wait of the running
// action (Wait, which the operator's Helm kube client goes through) then
// returns a *Superseded error at once, Helm records the revision failed with
// that error in its description, and the reconcile ends so that the new
// generation's runs next. An action that is applying objects is never cut
// short: the applying finishes, and a wait that follows it is preempted.

// Superseded is the error a preempted wait returns, and so the one Helm
// records in the description of the revision it fails.
type Superseded struct {
	// From is the generation whose action was preempted, To the newer one.
	From, To int64
	// On is what the action waited on ("hook", "wait").
	On string
}

func (s *Superseded) Error() string {
	return fmt.Sprintf("superseded by generation %d: a newer spec of the resource cancelled this action for generation %d while it waited", s.To, s.From)
}

// Waited says in words what the preempted action waited on.
func (s *Superseded) Waited() string {
	if s.On == WaitingOnHook {
		return "a hook"
	}
	return "Helm's wait for the release's objects"
}

// What a preempted action waited on (Wait's on).
const (
	WaitingOnHook = "hook"
	WaitingOnWait = "wait"
)

// runningAction is one running Helm action of the registry.
type runningAction struct {
	act string
	uid types.UID
	gen int64
	// by is the newer generation that supersedes it, 0 for none.
	by int64
	// waiting counts the waits under way; preempt is closed once the
	// action is superseded while one is, and preempted records that a wait
	// ended so (the action failed because of it).
	waiting   int
	preempt   chan struct{}
	closed    bool
	preempted *Superseded
	// noLock marks a run that writes no revision (a test run, beginTest).
	noLock bool
}

// supersede marks ra superseded by gen and cancels its waits; a.mu is held.
func (ra *runningAction) supersede(gen int64) {
	if ra.gen <= 0 || gen <= ra.gen || gen <= ra.by {
		return
	}
	ra.by = gen
	if ra.waiting > 0 && !ra.closed {
		close(ra.preempt)
		ra.closed = true
	}
}

// Supersede tells the registry that the resource uid, whose release is
// ns/name, is at generation gen (the primary watch saw it). A running action
// of the resource for an older generation is preempted if it waits, now or
// later; one that is applying objects goes on until it waits or ends.
func (a *Actions) Supersede(ns, name string, uid types.UID, gen int64) {
	if a == nil || uid == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen > a.seen[uid] {
		a.seen[uid] = gen
	}
	if ra := a.running[ns+"/"+name]; ra != nil && ra.uid == uid {
		ra.supersede(gen)
	}
}

// Forget drops what the registry knows of resource uid, whose release is
// ns/name (it was deleted): its generations, and the revision its actions
// wrote and when the last ended, unless a resource created again under the
// name wrote since.
func (a *Actions) Forget(ns, name string, uid types.UID) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seen, uid)
	key := ns + "/" + name
	if w, ok := a.wrote[key]; ok && w.uid == uid {
		delete(a.wrote, key)
	}
	if e, ok := a.ended[key]; ok && e.uid == uid {
		delete(a.ended, key)
	}
}

// Wait runs wait, a wait of the action running on release ns/name (a hook's
// or Helm's wait; on says which), and returns its error — or, as soon as a
// newer generation supersedes the action, a *Superseded error. wait itself
// may go on in the background until its own timeout: Helm's kube client
// cannot be interrupted, and only reads meanwhile. Without a running action
// of this process, Wait is wait().
func (a *Actions) Wait(ns, name, on string, wait func() error) error {
	if a == nil {
		return wait()
	}
	a.mu.Lock()
	ra := a.running[ns+"/"+name]
	if ra == nil {
		a.mu.Unlock()
		return wait()
	}
	if ra.by > 0 {
		ra.preempted = &Superseded{From: ra.gen, To: ra.by, On: on}
		a.mu.Unlock()
		return ra.preempted
	}
	ra.waiting++
	preempt := ra.preempt
	a.mu.Unlock()

	done := make(chan error, 1)
	go func() { done <- wait() }()
	var err error
	cut := false
	select {
	case err = <-done:
	case <-preempt:
		cut = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ra.waiting--
	if cut {
		ra.preempted = &Superseded{From: ra.gen, To: ra.by, On: on}
		return ra.preempted
	}
	return err
}

// preemptedBy is the wait of ra that a newer generation preempted, nil when
// none was.
func (a *Actions) preemptedBy(ra *runningAction) *Superseded {
	if a == nil || ra == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return ra.preempted
}

// superseded rephrases e, the failure of an action a newer generation
// preempted (s), so that it says so: the revision, the generations and what
// it waited on. Helm's own words ("failed pre-install: superseded by ...")
// add nothing to it.
func (r *Runner) superseded(e *Error, s *Superseded, after State, helmAction string) {
	what := s.Waited()
	if s.On == WaitingOnHook {
		if h := unfinishedHook(after.Latest); h != nil {
			what = fmt.Sprintf("hook %s (%s %s)", h.Name, eventOf(h, helmAction), h.Kind)
		}
	}
	rev := ""
	if e.Revision > 0 {
		rev = fmt.Sprintf(" at revision %d", e.Revision)
	}
	e.Summary = fmt.Sprintf("The %s of release %s%s for generation %d was superseded by generation %d while it waited on %s; generation %d runs next",
		e.Action, r.Name, rev, s.From, s.To, what, s.To)
	e.Err = nil
	e.Superseded = s
	if e.Action == "" {
		e.Action = status.ActionInstall
	}
}
