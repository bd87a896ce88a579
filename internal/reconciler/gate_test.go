package reconciler

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The gate holds a failed resource back until its backoff has passed, unless
// what it saw could change the verdict: the generation, the retry
// annotation, the steering annotations, the release's storage written by
// someone else. A resource out of retries waits for the first two only.
func TestRetryGate(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	seen := verdictInputs{generation: 2, retry: "a", annotations: "x=1\n", foreignWrites: 3}
	tests := []struct {
		name      string
		exhausted bool
		change    func(*verdictInputs)
		held      bool
	}{
		{"nothing changed", false, func(*verdictInputs) {}, true},
		{"a new generation", false, func(s *verdictInputs) { s.generation++ }, false},
		{"a new retry value", false, func(s *verdictInputs) { s.retry = "b" }, false},
		{"a steering annotation", false, func(s *verdictInputs) { s.annotations = "" }, false},
		{"storage written by someone else", false, func(s *verdictInputs) { s.foreignWrites++ }, false},
		{"RBAC of a refused resource's namespace", false, func(s *verdictInputs) { s.rbacChanges++ }, false},
		{"out of retries, nothing changed", true, func(*verdictInputs) {}, true},
		{"out of retries, a steering annotation", true, func(s *verdictInputs) { s.annotations = "" }, true},
		{"out of retries, storage", true, func(s *verdictInputs) { s.foreignWrites++ }, true},
		{"out of retries, RBAC", true, func(s *verdictInputs) { s.rbacChanges++ }, true},
		{"out of retries, a new retry value", true, func(s *verdictInputs) { s.retry = "b" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g retryGate
			at := now.Add(time.Minute)
			if tt.exhausted {
				at = time.Time{}
			}
			g.holdUntil("u", seen, at)
			cur := seen
			tt.change(&cur)
			if held, _ := g.wait("u", cur, now); held != tt.held {
				t.Errorf("wait = %v, want %v", held, tt.held)
			}
		})
	}

	// A stall on a bad annotation seen during the wait: removing the
	// annotation, back to what the failure saw, ends the wait.
	var g retryGate
	g.holdUntil("u", seen, now.Add(time.Minute))
	g.holdWhileAnnotations("u", "x=bad\n")
	if held, _ := g.wait("u", seen, now); held {
		t.Error("the annotations as the failure saw them, after a stall on others, are still held back")
	}
	g.foreignWrite("u")
	if got := g.foreignWritesSeen("u"); got != 1 {
		t.Errorf("foreignWritesSeen = %d after one change", got)
	}
	g.forget("u")
	if held, _ := g.wait("u", seen, now); held || g.foreignWritesSeen("u") != 0 {
		t.Error("a forgotten resource is still known")
	}
}

// A refusal's backoff counts in the gate (the status does not count it); a
// change to its namespace's RBAC ends the wait, restarts the count and
// marks the next refusal as met right after it. Other namespaces' RBAC and
// resources that were not refused are left alone.
func TestRetryGateRefusals(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	web := types.NamespacedName{Namespace: "a", Name: "web"}
	var g retryGate
	for i := int64(1); i <= 12; i++ {
		if n, woken := g.refusedAgain("u", web, 1); n != i || woken {
			t.Fatalf("refusal %d counted %d, woken %v", i, n, woken)
		}
	}
	if n, _ := g.refusedAgain("u", web, 2); n != 1 {
		t.Errorf("the first refusal of a new generation counted %d", n)
	}
	seen := verdictInputs{generation: 2, rbacChanges: g.rbacChangesSeen("u")}
	g.holdUntil("u", seen, now.Add(time.Hour))
	g.holdUntil("other", verdictInputs{generation: 1}, now.Add(time.Hour))
	if keys := g.rbacChanged("b"); len(keys) != 0 {
		t.Errorf("RBAC of namespace b woke %v", keys)
	}
	keys := g.rbacChanged("a")
	if len(keys) != 1 || keys[0] != web {
		t.Fatalf("RBAC of namespace a woke %v, want %v", keys, web)
	}
	if held, _ := g.wait("u", verdictInputs{generation: 2, rbacChanges: g.rbacChangesSeen("u")}, now); held {
		t.Error("a refused resource is still held back after its namespace's RBAC changed")
	}
	if held, _ := g.wait("other", verdictInputs{generation: 1, rbacChanges: g.rbacChangesSeen("other")}, now); !held {
		t.Error("a resource that was not refused was let through by an RBAC change")
	}
	for i := int64(1); i <= 2; i++ {
		if n, woken := g.refusedAgain("u", web, 2); n != i || !woken {
			t.Errorf("refusal %d after an RBAC change: counted %d, woken %v", i, n, woken)
		}
	}
	for n, want := range map[int64]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 11: time.Hour} {
		if got := settled(time.Hour, n); got != want {
			t.Errorf("refusal %d after an RBAC change, backoff 1h: retried after %s, want %s", n, got, want)
		}
	}
	if got := settled(time.Second, 1); got != time.Second {
		t.Errorf("a backoff shorter than the settling delay became %s", got)
	}
	g.notRefused("u")
	if keys := g.rbacChanged("a"); len(keys) != 0 {
		t.Errorf("a resource whose last failure was not a refusal was woken: %v", keys)
	}
}
