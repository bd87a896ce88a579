//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// After kube-apiserver restarts, each of the operator's informers opens its
// watch again on client-go's backoff (0.8 s doubling to 30 s), and a watch
// that the restarting server ends at once is retried on that backoff too: for
// some seconds the operator does not see a kind's changes. A change made then
// (a Deployment scaled by hand) is seen only when that watch is back, and
// until then the status it wrote before is what it knows — not a lie it
// tells, but a view that lags, which the stale-view tests perturb on purpose. So a
// history's step that restarts the API server ends when the operator watches
// again every kind it watched in the namespace before, as the audit log shows:
// a watch it opened after the restart that the server did not end at once.

// auditSize is the audit log's size, where a later read starts.
func auditSize() int64 {
	fi, err := os.Stat(suite.cp.AuditLogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// operatorWatch is one watch request of the operator's, as the audit log
// records it: started, and ended (zero while it lasts).
type operatorWatch struct {
	resource       string
	started, ended time.Time
}

// operatorWatches reads the operator's watches in namespace ns from the
// audit log, from byte from on, by audit ID.
func operatorWatches(ns string, from int64) (map[string]*operatorWatch, error) {
	f, err := os.Open(suite.cp.AuditLogPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[string]*operatorWatch{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"verb":"watch"`) {
			continue
		}
		var ev struct {
			AuditID        string    `json:"auditID"`
			Stage          string    `json:"stage"`
			UserAgent      string    `json:"userAgent"`
			StageTimestamp time.Time `json:"stageTimestamp"`
			ObjectRef      struct {
				Resource  string `json:"resource"`
				Namespace string `json:"namespace"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.ObjectRef.Namespace != ns || !strings.HasPrefix(ev.UserAgent, "manager/") {
			continue
		}
		w := out[ev.AuditID]
		if w == nil {
			w = &operatorWatch{resource: ev.ObjectRef.Resource}
			out[ev.AuditID] = w
		}
		switch ev.Stage {
		case "ResponseStarted":
			w.started = ev.StageTimestamp
		case "ResponseComplete":
			w.ended = ev.StageTimestamp
		}
	}
	return out, sc.Err()
}

// waitOperatorWatching waits until the operator watches again, after the
// API server went down at down, every resource of the namespace it was
// watching then, in the audit log from byte from on (the test's start) —
// each with a watch started after down (so on the new server) that lasts:
// still open, or open for a second. (An operator that had to be started
// again starts with lists: its view is new; the caller does not wait.)
// Only the running process' watches count, those started since e.opStarted:
// the audit log may hold no end for a watch of a process SIGKILLed earlier
// (the soak's seed 83811307: two watches of a process killed at step 6, on
// a server restarted at step 5, never ended there, and a paused resource
// gave the later processes no reason to watch those kinds).
func (e *env) waitOperatorWatching(from int64, down time.Time) {
	e.t.Helper()
	start := time.Now()
	for {
		ws, err := operatorWatches(e.ns, from)
		if err != nil {
			e.t.Fatalf("reading the audit log: %v", err)
		}
		before, live := map[string]bool{}, map[string]bool{}
		for _, w := range ws {
			// Open when the server went down: the running operator's view
			// then (a process killed earlier, or a watch it ended, is not).
			if !w.started.IsZero() && !w.started.Before(e.opStarted) && w.started.Before(down) && (w.ended.IsZero() || !w.ended.Before(down)) {
				before[w.resource] = true
			}
			if w.started.After(down) && (w.ended.IsZero() || w.ended.Sub(w.started) >= time.Second) {
				live[w.resource] = true
			}
		}
		var missing []string
		for r := range before {
			if !live[r] {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			e.t.Logf("the operator watches its %d resources again, %.1fs after the API server went down", len(before), time.Since(down).Seconds())
			return
		}
		if time.Since(start) > deadline {
			sort.Strings(missing)
			e.fatalf("liveness: %s after the API server went down, the operator does not watch %s again", time.Since(down).Round(time.Second), strings.Join(missing, ", "))
		}
		time.Sleep(pollInterval)
	}
}
