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
// gives up after limit and returns the time it gave up and false.
func (t *auditTail) quietAfter(user string, since time.Time, quiet, limit time.Duration) (time.Time, bool, error) {
	deadline := time.Now().Add(limit)
	for {
		evs, err := t.Read()
		if err != nil {
			return time.Time{}, false, err
		}
		last := LastRequest(evs, user)
		if last.Before(since) {
			last = since
		}
		now := time.Now()
		if now.Sub(last) >= quiet {
			return last.Add(time.Millisecond), true, nil
		}
		if now.After(deadline) {
			return now, false, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}
