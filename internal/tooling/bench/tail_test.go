package bench

import (
	"testing"
	"time"
)

// A process is idle once a whole window of samples shows at most idleCPU of
// work; one busy stretch inside the window makes it not idle.
func TestIdleWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var w idleWindow
	window := 2 * time.Second
	// Busy for the first second: 0.5 CPU-seconds per 250 ms.
	cpu := 0.0
	for ms := 0; ms <= 1000; ms += 250 {
		if w.add(at(ms), cpu, window) {
			t.Fatalf("idle at %d ms, before samples span the window", ms)
		}
		cpu += 0.5
	}
	// Then idle but for the runtime's crumbs.
	idleAt := -1
	for ms := 1250; ms <= 5000; ms += 250 {
		cpu += 0.001
		if w.add(at(ms), cpu, window) && idleAt < 0 {
			idleAt = ms
		}
	}
	// The busy samples end at 1250 ms (the last +0.5 lands there), so the
	// first window without them starts at 1250 ms and ends at 3250 ms.
	if idleAt != 3250 {
		t.Errorf("idle from %d ms, want 3250 ms", idleAt)
	}
	// A burst inside the window ends idleness again.
	cpu += 0.2
	if w.add(at(5250), cpu, window) {
		t.Error("idle right after a 0.2 CPU-second burst")
	}
	if len(w.at) > 10 {
		t.Errorf("the window keeps %d samples; old ones are not dropped", len(w.at))
	}
}
