package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"
)

// auditTail reads an audit log incrementally: each Read parses only the
// complete lines written since the last one, so watching a growing log costs
// little CPU next to the operator being measured.
type auditTail struct {
	path   string
	offset int64
	events []Event
	seen   map[string]bool
}

// Read parses what is new and returns every event so far.
func (t *auditTail) Read() ([]Event, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, err
	}
	chunk, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	end := bytes.LastIndexByte(chunk, '\n')
	if end < 0 {
		return t.events, nil
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	evs, err := ParseAudit(bytes.NewReader(chunk[:end+1]), t.seen)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.path, err)
	}
	t.offset += int64(end + 1)
	t.events = append(t.events, evs...)
	return t.events, nil
}

// quietAfter returns the time user's last request was received once user has
// made none for quiet, counting from since at the earliest, and true; it
// gives up after limit and returns the time it gave up and false. With a
// pid, the process must also have been idle for quiet (at most idleCPU of
// CPU-seconds): an operator at work without a request (a new process
// decoding thousands of resources from its first watch, at N = 5000 for
// seconds) is not quiet, or a phase would end before the requests that
// work leads to.
func (t *auditTail) quietAfter(user string, since time.Time, quiet, limit time.Duration, pid int) (time.Time, bool, error) {
	deadline := time.Now().Add(limit)
	var cpu idleWindow
	for {
		evs, err := t.Read()
		if err != nil {
			return time.Time{}, false, err
		}
		now := time.Now()
		idle := true
		if pid > 0 {
			s, err := processCPU(pid)
			if err != nil {
				return time.Time{}, false, err
			}
			idle = cpu.add(now, s, quiet)
		}
		last := LastRequest(evs, user)
		if last.Before(since) {
			last = since
		}
		if now.Sub(last) >= quiet && idle {
			return last.Add(time.Millisecond), true, nil
		}
		if now.After(deadline) {
			return now, false, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// idleCPU is the most CPU-seconds a process may use in a quiet window and
// still count as idle: 5 % of a core over the 2 s window (our operator at
// rest uses well under 1 %).
const idleCPU = 0.05

// idleWindow holds a process' CPU-seconds sampled over time.
type idleWindow struct {
	at  []time.Time
	cpu []float64
}

// add records a sample and reports whether the process used at most
// idleCPU·(window/2 s) since a sample at least window old; false until
// samples span the window.
func (w *idleWindow) add(now time.Time, cpu float64, window time.Duration) bool {
	w.at = append(w.at, now)
	w.cpu = append(w.cpu, cpu)
	// The newest sample at least window old is the window's start; older
	// ones are not needed again.
	start := -1
	for i := range w.at {
		if now.Sub(w.at[i]) >= window {
			start = i
		}
	}
	if start < 0 {
		return false
	}
	w.at, w.cpu = w.at[start:], w.cpu[start:]
	return cpu-w.cpu[0] <= idleCPU*window.Seconds()/2
}
