package release

import (
	"errors"
	"testing"
)

// block is a wait that lasts until its channel is closed, and says whether it ran.
type block struct {
	ch  chan struct{}
	ran chan struct{}
}

func newBlock() *block { return &block{ch: make(chan struct{}), ran: make(chan struct{}, 1)} }

func (b *block) wait() error {
	b.ran <- struct{}{}
	<-b.ch
	return nil
}

func TestSupersedePreemptsAWait(t *testing.T) {
	a := NewActions()
	ra := a.begin("ns", "web", "install", "uid-1", 1)
	defer a.end("ns", "web", ra)
	b := newBlock()
	defer close(b.ch)
	done := make(chan error, 1)
	go func() { done <- a.Wait("ns", "web", WaitingOnHook, b.wait) }()
	<-b.ran // waiting now

	a.Supersede("ns", "web", "uid-1", 1) // the same generation: nothing
	a.Supersede("ns", "web", "uid-2", 5) // another resource of that name: nothing
	select {
	case err := <-done:
		t.Fatalf("the wait ended with %v, preempted by no newer generation of its resource", err)
	default:
	}
	a.Supersede("ns", "web", "uid-1", 2)
	err := <-done
	var s *Superseded
	if !errors.As(err, &s) || s.From != 1 || s.To != 2 || s.On != WaitingOnHook {
		t.Fatalf("the preempted wait returned %v, want superseded from 1 to 2 on a hook", err)
	}
	if got := a.preemptedBy(ra); got != s {
		t.Errorf("preemptedBy = %v, want %v", got, s)
	}
}

// An action applying objects is not cut short: its next wait is preempted
// at once, without waiting.
func TestSupersedeWaitsForTheApplyingToEnd(t *testing.T) {
	a := NewActions()
	ra := a.begin("ns", "web", "upgrade", "uid-1", 3)
	defer a.end("ns", "web", ra)
	a.Supersede("ns", "web", "uid-1", 4)
	if a.preemptedBy(ra) != nil {
		t.Fatal("an action that was not waiting counts as preempted")
	}
	called := false
	err := a.Wait("ns", "web", WaitingOnWait, func() error { called = true; return nil })
	if s := (*Superseded)(nil); !errors.As(err, &s) || called || s.To != 4 || s.On != WaitingOnWait {
		t.Fatalf("the wait after the supersession returned %v (waited: %v), want superseded by 4 at once", err, called)
	}
}

// The restart case: the watch saw the new generation before the old one's
// action began.
func TestActionBegunAfterANewerGenerationIsSuperseded(t *testing.T) {
	a := NewActions()
	a.Supersede("ns", "web", "uid-1", 2)
	ra := a.begin("ns", "web", "install", "uid-1", 1)
	defer a.end("ns", "web", ra)
	if err := a.Wait("ns", "web", WaitingOnHook, func() error { return nil }); err == nil {
		t.Fatal("the wait of an action for an outdated generation was not preempted")
	}
	// A newer generation's own action, and one with no generation (an
	// uninstall), are not.
	a.end("ns", "web", ra)
	for _, gen := range []int64{2, 0} {
		ra := a.begin("ns", "web", "install", "uid-1", gen)
		if err := a.Wait("ns", "web", WaitingOnHook, func() error { return nil }); err != nil {
			t.Errorf("generation %d: the wait returned %v", gen, err)
		}
		a.end("ns", "web", ra)
	}
	// Forgotten once the resource is deleted: nothing of it stays.
	a.Forget("ns", "web", "uid-1")
	if len(a.seen) != 0 || len(a.ended) != 0 || len(a.wrote) != 0 {
		t.Errorf("Forget left %v, %v, %v", a.seen, a.ended, a.wrote)
	}
}

// Without a running action, and a nil registry, Wait is the wait itself.
func TestWaitWithoutAnAction(t *testing.T) {
	want := errors.New("timed out")
	for _, a := range []*Actions{nil, NewActions()} {
		if err := a.Wait("ns", "web", WaitingOnHook, func() error { return want }); err != want {
			t.Errorf("Wait returned %v, want the wait's own error", err)
		}
	}
}
