package rollout

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Chart is the chart the kind's resources are rolled out to.
type Chart struct {
	Name, Version string
	// Digest is release.ChartDigest of the chart, which every revision the
	// operator writes carries in its labels.
	Digest string
}

// Resource is what the caches hold of one resource of the kind and of the
// latest record of its release in Helm's storage.
type Resource struct {
	Key types.NamespacedName
	UID types.UID
	// Held: the resource takes no part in the ranking for now: being
	// deleted, paused, stalled at its generation, or not selected by the
	// watch's selector.
	Held bool

	// Revision, RecordStatus and RecordChartDigest are the latest release
	// record's labels (version, status, helmapp.io/chart-digest); Revision 0
	// when the release has no record. RecordChartDigest is empty when the
	// record does not carry it (the chunked storage's index Secrets): the
	// status' deployedRelease chart and version are compared instead.
	Revision          int
	RecordStatus      string
	RecordChartDigest string
	// DeployedChart and DeployedVersion are status.deployedRelease's.
	DeployedChart, DeployedVersion string
	// ReadyAtRevision: Ready=True at the resource's generation, with
	// deployedRelease naming the latest revision.
	ReadyAtRevision bool
	// Stalled: Stalled=True at the resource's generation.
	Stalled bool
	// Failing: ReleaseFailed=True at the resource's generation for an
	// upgrade: its last upgrade failed, whether Helm stored a revision for it
	// or not (the chart did not render, a permission was missing), and
	// whether or not it was rolled back (upgradeRemediation: rollback).
	Failing bool
}

// State is where a resource stands in the rollout of a chart.
type State string

// States, also the values of the metric helmapp_rollout_resources' label state.
const (
	// StateWaiting: deployed on an older chart, Ready or not.
	StateWaiting State = "waiting"
	// StateInProgress: upgrading to the new chart, or upgraded and not yet Ready.
	StateInProgress State = "in_progress"
	// StateUpgraded: deployed on the new chart and Ready.
	StateUpgraded State = "upgraded"
	// StateFailed: failed on the new chart (its upgrade failed, or it is
	// stalled on it).
	StateFailed State = "failed"
	// StateNone: not part of a rollout: no release yet, or a release that
	// is pending or failed on another chart.
	StateNone State = ""
)

// States lists the states a rollout counts, in the order messages name them.
var States = []State{StateWaiting, StateInProgress, StateUpgraded, StateFailed}

// Classify says where r stands in the rollout to c.
func Classify(r Resource, c Chart) State {
	if r.Revision == 0 {
		return StateNone
	}
	onNew := r.DeployedChart == c.Name && r.DeployedVersion == c.Version
	if r.RecordChartDigest != "" {
		onNew = r.RecordChartDigest == c.Digest
	}
	switch {
	case onNew && r.RecordStatus == "deployed" && r.Stalled:
		return StateFailed
	case onNew && r.RecordStatus == "deployed" && r.ReadyAtRevision:
		return StateUpgraded
	case onNew && strings.HasPrefix(r.RecordStatus, "pending-") && r.Failing:
		// Retrying after a failure: failed until it succeeds, so that the
		// rollout does not resume for the length of each retry.
		return StateFailed
	case onNew && (r.RecordStatus == "deployed" || strings.HasPrefix(r.RecordStatus, "pending-")):
		return StateInProgress
	case onNew && r.RecordStatus == "failed":
		return StateFailed
	case !onNew && r.RecordStatus == "deployed" && r.Failing:
		// Its upgrade to the new chart failed before Helm stored a
		// revision, or was rolled back.
		return StateFailed
	case !onNew && r.RecordStatus == "deployed":
		return StateWaiting
	}
	return StateNone
}

// Snapshot is a rollout as the caches show it, with the slots this process
// reserved.
type Snapshot struct {
	Chart  Chart
	Budget Budget
	// Counts of the resources in each state; Total is their sum.
	Counts map[State]int
	Total  int
	// Failed names the failed resources ("namespace/name"), sorted.
	Failed []string
	// candidates are the waiting resources that are not held and hold no
	// reservation, sorted by namespace and name: the order in which they get
	// slots.
	candidates []types.NamespacedName
	// states of every resource, by key.
	states map[types.NamespacedName]State
}

// NewSnapshot classifies rs; a resource in reserved that the caches still
// show waiting (or not at all in the rollout) counts as in progress: its
// upgrade has started, or is about to.
func NewSnapshot(rs []Resource, c Chart, b Budget, reserved map[types.NamespacedName]bool) Snapshot {
	s := Snapshot{Chart: c, Budget: b, Counts: map[State]int{}, states: map[types.NamespacedName]State{}}
	for _, r := range rs {
		st := Classify(r, c)
		if reserved[r.Key] && (st == StateWaiting || st == StateNone) {
			st = StateInProgress
		}
		s.states[r.Key] = st
		if st == StateNone {
			continue
		}
		s.Counts[st]++
		s.Total++
		switch {
		case st == StateFailed:
			s.Failed = append(s.Failed, r.Key.String())
		case st == StateWaiting && !r.Held:
			s.candidates = append(s.candidates, r.Key)
		}
	}
	sort.Strings(s.Failed)
	sort.Slice(s.candidates, func(i, j int) bool { return s.candidates[i].String() < s.candidates[j].String() })
	return s
}

// StateOf is the state of the resource key, StateNone when unknown.
func (s Snapshot) StateOf(key types.NamespacedName) State { return s.states[key] }

// Unavailable counts the resources that take a slot: in progress or failed.
func (s Snapshot) Unavailable() int { return s.Counts[StateInProgress] + s.Counts[StateFailed] }

// Free is how many more upgrades may start now.
func (s Snapshot) Free() int { return max(s.Budget.Slots(s.Total)-s.Unavailable(), 0) }

// Halted reports whether the failures halt the rollout.
func (s Snapshot) Halted() bool { return s.Budget.Halted(s.Counts[StateFailed]) }

// Active reports whether a rollout is under way: resources wait or upgrade.
func (s Snapshot) Active() bool { return s.Counts[StateWaiting] > 0 || s.Counts[StateInProgress] > 0 }

// Admits reports whether key, which asks to upgrade to the new chart, may
// start now: the rollout is not halted and fewer than Free waiting
// resources come before it by namespace and name.
func (s Snapshot) Admits(key types.NamespacedName) bool {
	if s.Halted() {
		return false
	}
	return s.rank(key) < s.Free()
}

// rank is how many candidates other than key sort before it.
func (s Snapshot) rank(key types.NamespacedName) int {
	k := key.String()
	return sort.Search(len(s.candidates), func(i int) bool { return s.candidates[i].String() >= k })
}

// Next are the waiting resources that get the free slots, in order.
func (s Snapshot) Next() []types.NamespacedName {
	if s.Halted() {
		return nil
	}
	return s.candidates[:min(s.Free(), len(s.candidates))]
}

// Waiting are all the waiting resources that are not held.
func (s Snapshot) Waiting() []types.NamespacedName { return s.candidates }
