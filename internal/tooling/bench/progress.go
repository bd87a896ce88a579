package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress is the one line on stderr that says what the benchmark is doing.
// On a terminal it is rewritten in place; elsewhere (make in CI) a line is
// printed when the phase changes and at most every 10 s within a phase.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	start  time.Time
	phase  string
	last   time.Time
	prefix string
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// setPrefix names the current run (N, round, operator).
func (p *progress) setPrefix(s string) {
	p.mu.Lock()
	p.prefix = s
	p.mu.Unlock()
}

// report shows phase and detail.
func (p *progress) report(phase, detail string) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	line := fmt.Sprintf("[bench %4.0fs] %s: %s", now.Sub(p.start).Seconds(), p.prefix, phase)
	if detail != "" {
		line += " " + detail
	}
	switch {
	case p.tty:
		if now.Sub(p.last) < 200*time.Millisecond && phase == p.phase {
			return
		}
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	case phase != p.phase || now.Sub(p.last) >= 10*time.Second:
		fmt.Fprintln(p.w, line)
	default:
		return
	}
	p.phase, p.last = phase, now
}

// done ends the progress line.
func (p *progress) done() {
	if p != nil && p.w != nil && p.tty {
		fmt.Fprintln(p.w)
	}
}
