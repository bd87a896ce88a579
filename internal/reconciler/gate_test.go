package reconciler

import (
	"testing"
	"time"
)

// The gate holds a failed resource back until its backoff has passed, unless
// what it saw could change the verdict: the generation, the retry
// annotation, the steering annotations, the release's storage written by
// someone else. A resource out of retries waits for the first two only.
func TestRetryGate(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	seen := trigger{generation: 2, retry: "a", annotations: "x=1\n", storage: 3}
	tests := []struct {
		name      string
		exhausted bool
		change    func(*trigger)
		held      bool
	}{
		{"nothing changed", false, func(*trigger) {}, true},
		{"a new generation", false, func(s *trigger) { s.generation++ }, false},
		{"a new retry value", false, func(s *trigger) { s.retry = "b" }, false},
		{"a steering annotation", false, func(s *trigger) { s.annotations = "" }, false},
		{"storage written by someone else", false, func(s *trigger) { s.storage++ }, false},
		{"out of retries, nothing changed", true, func(*trigger) {}, true},
		{"out of retries, a steering annotation", true, func(s *trigger) { s.annotations = "" }, true},
		{"out of retries, storage", true, func(s *trigger) { s.storage++ }, true},
		{"out of retries, a new retry value", true, func(s *trigger) { s.retry = "b" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g retryGate
			at := now.Add(time.Minute)
			if tt.exhausted {
				at = time.Time{}
			}
			g.hold("u", seen, at)
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
	g.hold("u", seen, now.Add(time.Minute))
	g.rejudged("u", "x=bad\n")
	if held, _ := g.wait("u", seen, now); held {
		t.Error("the annotations as the failure saw them, after a stall on others, are still held back")
	}
	g.storageChanged("u")
	if got := g.storageSeen("u"); got != 1 {
		t.Errorf("storageSeen = %d after one change", got)
	}
	g.forget("u")
	if held, _ := g.wait("u", seen, now); held || g.storageSeen("u") != 0 {
		t.Error("a forgotten resource is still known")
	}
}
