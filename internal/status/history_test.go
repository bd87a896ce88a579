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

// Deployed's message names the templates that render differently, from the
// reconcile that deployed the revision, and keeps them while it stays
// deployed; a new revision of a chart that renders the same drops them.
func TestNondeterministicNote(t *testing.T) {
	d := &DeployedRelease{Name: "web", Revision: 1, Chart: "random", ChartVersion: "0.1.0"}
	s := Compute(Status{}, Outcome{Generation: 1, DeployedKnown: true, Deployed: d, Action: ActionInstall, DeployedBy: ActionInstall,
		ActionSucceeded: true, Nondeterministic: []string{"random/templates/secret.yaml"}})
	msg := func(s Status) string {
		for _, c := range s.Conditions {
			if c.Type == TypeDeployed {
				return c.Message
			}
		}
		return ""
	}
	if m := msg(s); !strings.Contains(m, "renders differently on each run") || !strings.Contains(m, "random/templates/secret.yaml") {
		t.Fatalf("Deployed's message %q", m)
	}
	kept := Compute(s, Outcome{Generation: 1, DeployedKnown: true, Deployed: d, Action: ActionReconcile})
	if msg(kept) != msg(s) {
		t.Errorf("a re-apply changed Deployed's message to %q", msg(kept))
	}
	d2 := *d
	d2.Revision = 2
	next := Compute(kept, Outcome{Generation: 2, DeployedKnown: true, Deployed: &d2, Action: ActionUpgrade, DeployedBy: ActionUpgrade, ActionSucceeded: true})
	if m := msg(next); strings.Contains(m, "renders differently") {
		t.Errorf("revision 2 rendered the same, yet Deployed says %q", m)
	}
}
