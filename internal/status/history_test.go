package status

import (
	"encoding/json"
	"strings"
	"testing"
)

func entry(rev int, action string, detail string) HistoryEntry {
	return HistoryEntry{Revision: rev, Action: action, Causes: []Cause{{Type: CauseSpecChanged, Detail: detail}}}
}

// status.history keeps the newest entries within its bounds: a count and a
// byte budget, the oldest dropped first, the newest always kept.
func TestAddHistory(t *testing.T) {
	var h []HistoryEntry
	for rev := 1; rev <= 15; rev++ {
		h = AddHistory(h, []HistoryEntry{entry(rev, ActionUpgrade, "generation")})
	}
	if len(h) != MaxHistoryEntries || h[0].Revision != 15 || h[len(h)-1].Revision != 6 {
		t.Fatalf("history of %d entries, newest %d, oldest %d; want %d, 15, 6", len(h), h[0].Revision, h[len(h)-1].Revision, MaxHistoryEntries)
	}
	// A detail is bounded; entries past the byte budget go.
	long := strings.Repeat("k", 5000)
	h = AddHistory(h, []HistoryEntry{entry(16, ActionUpgrade, long), entry(17, ActionUpgrade, long)})
	b, _ := json.Marshal(h)
	if len(b) > MaxHistoryBytes || h[0].Revision != 16 {
		t.Errorf("history of %d bytes, newest %d; want at most %d, newest 16", len(b), h[0].Revision, MaxHistoryBytes)
	}
	if d := h[0].Causes[0].Detail; len(d) > MaxCauseDetail+3 {
		t.Errorf("a detail of %d bytes", len(d))
	}
	// An entry for a revision and action already there replaces it (a
	// progress write, then the outcome); an uninstall of that revision
	// stays beside it.
	h = AddHistory([]HistoryEntry{entry(1, ActionInstall, "old")}, []HistoryEntry{entry(1, ActionUninstall, "remedy"), entry(1, ActionInstall, "new")})
	if len(h) != 2 || h[0].Action != ActionUninstall || h[1].Causes[0].Detail != "new" {
		t.Errorf("history %+v", h)
	}
	if got := AddHistory(h, nil); len(got) != 2 {
		t.Errorf("nothing added changed the history: %+v", got)
	}
}

func TestCauseLine(t *testing.T) {
	got := CauseLine([]Cause{{Type: CauseSpecChanged, Detail: "generation 1→2, values keys image", Initiator: "kubectl-edit"},
		{Type: CauseChartChanged, Detail: "chart 1.0.0→1.1.0"}})
	want := "SpecChanged: generation 1→2, values keys image (by kubectl-edit); ChartChanged: chart 1.0.0→1.1.0"
	if got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
