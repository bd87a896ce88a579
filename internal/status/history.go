package status

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// status.history: the revisions the operator made, newest first, each with
// why it made it. Helm's history says what was deployed; this says why.

// Bounds of status.history: at most MaxHistoryEntries entries and
// MaxHistoryBytes of JSON; the oldest entries go first.
const (
	MaxHistoryEntries = 10
	MaxHistoryBytes   = 8 << 10
	// MaxCauseDetail bounds one cause's detail.
	MaxCauseDetail = 256
)

// Cause types: the fixed list of why the operator makes a revision.
const (
	// CauseSpecChanged: the resource's spec (or its valuesFrom list)
	// changed, or the resource was created: the generation a→b, the
	// top-level values keys that changed, and the field manager of the
	// change when known.
	CauseSpecChanged = "SpecChanged"
	// CauseValuesSourceChanged: an object valuesFrom references changed
	// (which one, its resourceVersion old→new).
	CauseValuesSourceChanged = "ValuesSourceChanged"
	// CauseChartChanged: the watch's chart changed (version from→to, and
	// whether a staged rollout admitted it).
	CauseChartChanged = "ChartChanged"
	// CauseDriftRepaired: a repair of drift made a revision. The re-apply
	// of drift never does (it writes objects, not a revision): listed for
	// completeness of the contract.
	CauseDriftRepaired = "DriftRepaired"
	// CauseRetryRequested: the annotation helmapp.io/retry took a new
	// value, or a failed revision is tried again.
	CauseRetryRequested = "RetryRequested"
	// CauseRemediation: the watch's remediation rolled back a failed
	// upgrade or uninstalled a failed install.
	CauseRemediation = "Remediation"
	// CauseForeignRevisionUndone: someone else wrote a revision that the
	// operator upgrades back to the spec.
	CauseForeignRevisionUndone = "ForeignRevisionUndone"
	// CauseAdopted: a release with no owner became the resource's own.
	CauseAdopted = "Adopted"
	// CauseOperatorUpgraded: nothing the resource or the watch decides
	// changed, yet the operator's own record of them did (a new operator
	// version digests or labels revisions otherwise).
	CauseOperatorUpgraded = "OperatorUpgraded"
)

// Cause is one reason for a revision. It names keys and objects, never a value.
type Cause struct {
	Type   string `json:"type"`
	Detail string `json:"detail,omitempty"`
	// Initiator is who made the change (a field manager), when known.
	Initiator string `json:"initiator,omitempty"`
}

// HistoryEntry is one revision the operator made.
type HistoryEntry struct {
	Revision int `json:"revision"`
	// Action is install, upgrade, rollback or uninstall.
	Action       string `json:"action"`
	ChartVersion string `json:"chartVersion,omitempty"`
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// Status is Helm's status of the revision when the action ended.
	Status   string       `json:"status,omitempty"`
	Started  *metav1.Time `json:"started,omitempty"`
	Finished *metav1.Time `json:"finished,omitempty"`
	// Causes are why the operator made it; never empty.
	Causes []Cause `json:"causes"`
}

// CauseLine is causes in one line, as Helm's revision description holds
// it ("SpecChanged: generation 1→2, keys image; ChartChanged: ...").
func CauseLine(causes []Cause) string {
	parts := make([]string, 0, len(causes))
	for _, c := range causes {
		s := c.Type
		if c.Detail != "" {
			s += ": " + c.Detail
		}
		if c.Initiator != "" {
			s += " (by " + c.Initiator + ")"
		}
		parts = append(parts, s)
	}
	return Bound(strings.Join(parts, "; "), MaxMessageLength)
}

// CauseTypes are the types of the fixed list, in its order.
var CauseTypes = []string{CauseSpecChanged, CauseValuesSourceChanged, CauseChartChanged, CauseDriftRepaired,
	CauseRetryRequested, CauseRemediation, CauseForeignRevisionUndone, CauseAdopted, CauseOperatorUpgraded}

// AddHistory returns prev with the entries of added (newest first) in
// front, an entry of the same revision and action in prev replaced by it, within the bounds:
// at most MaxHistoryEntries entries and MaxHistoryBytes of JSON, dropping
// the oldest first (the newest always stays).
func AddHistory(prev, added []HistoryEntry) []HistoryEntry {
	if len(added) == 0 {
		return prev
	}
	out := make([]HistoryEntry, 0, len(prev)+len(added))
	type key struct {
		rev    int
		action string
	}
	seen := map[key]bool{}
	for _, e := range added {
		for i := range e.Causes {
			e.Causes[i].Detail = Bound(e.Causes[i].Detail, MaxCauseDetail)
		}
		out = append(out, e)
		seen[key{e.Revision, e.Action}] = true
	}
	for _, e := range prev {
		// An uninstall's entry shares the revision it uninstalled: both stay.
		if !seen[key{e.Revision, e.Action}] {
			out = append(out, e)
		}
	}
	if len(out) > MaxHistoryEntries {
		out = out[:MaxHistoryEntries]
	}
	for len(out) > 1 {
		b, _ := json.Marshal(out)
		if len(b) <= MaxHistoryBytes {
			break
		}
		out = out[:len(out)-1]
	}
	return out
}

// copyHistory returns a copy of h that shares no memory with it.
func copyHistory(h []HistoryEntry) []HistoryEntry {
	if h == nil {
		return nil
	}
	out := make([]HistoryEntry, len(h))
	for i, e := range h {
		e.Causes = append([]Cause(nil), e.Causes...)
		if e.Started != nil {
			e.Started = e.Started.DeepCopy()
		}
		if e.Finished != nil {
			e.Finished = e.Finished.DeepCopy()
		}
		out[i] = e
	}
	return out
}

// nondeterministicMark begins the part of Deployed's message that says the
// chart renders differently on each run.
const nondeterministicMark = "; the chart renders differently on each run with the same values"

// nondeterministicNote is what Deployed's message adds when the chart's
// templates rendered differently twice with the same input: named by the
// reconcile that deployed revision rev, kept by the reconciles that deploy
// nothing while rev stays deployed.
func nondeterministicNote(prev Status, o Outcome, rev int) string {
	if o.DeployedBy == "" {
		old := meta.FindStatusCondition(prev.Conditions, TypeDeployed)
		if old == nil || prev.DeployedRelease == nil || prev.DeployedRelease.Revision != rev {
			return ""
		}
		if i := strings.Index(old.Message, nondeterministicMark); i >= 0 {
			return old.Message[i:]
		}
		return ""
	}
	if len(o.Nondeterministic) == 0 {
		return ""
	}
	return Bound(fmt.Sprintf("%s (templates %s): it is upgraded only when they or the chart change, not for each render",
		nondeterministicMark, strings.Join(o.Nondeterministic, ", ")), MaxMessageLength/2)
}
