package rollout

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var newChart = Chart{Name: "c", Version: "0.2.0", Digest: "new"}

func res(name string, mutate func(*Resource)) Resource {
	r := Resource{Key: types.NamespacedName{Namespace: "ns", Name: name}, Revision: 1, RecordStatus: "deployed",
		RecordChartDigest: "old", DeployedChart: "c", DeployedVersion: "0.1.0", ReadyAtRevision: true}
	if mutate != nil {
		mutate(&r)
	}
	return r
}

func onNew(st string, ready bool) func(*Resource) {
	return func(r *Resource) {
		r.Revision, r.RecordStatus, r.RecordChartDigest, r.DeployedVersion, r.ReadyAtRevision = 2, st, "new", "0.2.0", ready
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		r    Resource
		want State
	}{
		{"old chart, deployed", res("a", nil), StateWaiting},
		{"old chart, not Ready: still waiting", res("a", func(r *Resource) { r.ReadyAtRevision = false }), StateWaiting},
		{"new chart, Ready", res("a", onNew("deployed", true)), StateUpgraded},
		{"new chart, not Ready yet", res("a", onNew("deployed", false)), StateInProgress},
		{"new chart, upgrading", res("a", onNew("pending-upgrade", false)), StateInProgress},
		{"new chart, failed", res("a", onNew("failed", false)), StateFailed},
		{"new chart, stalled (readiness deadline)", res("a", func(r *Resource) { onNew("deployed", false)(r); r.Stalled = true }), StateFailed},
		{"old chart, upgrade failed before Helm stored a revision, or rolled back", res("a", func(r *Resource) { r.Failing = true }), StateFailed},
		{"new chart, retrying after a failure", res("a", func(r *Resource) { onNew("pending-upgrade", false)(r); r.Failing = true }), StateFailed},
		{"no release yet", res("a", func(r *Resource) { r.Revision = 0 }), StateNone},
		{"failed on the old chart", res("a", func(r *Resource) { r.RecordStatus = "failed" }), StateNone},
		{"no digest label (chunked): chart version compared", res("a", func(r *Resource) { r.RecordChartDigest = "" }), StateWaiting},
		{"no digest label, new version", res("a", func(r *Resource) { onNew("deployed", true)(r); r.RecordChartDigest = "" }), StateUpgraded},
		{"same version, new digest (chart changed in place)", res("a", func(r *Resource) { r.DeployedVersion = "0.2.0" }), StateWaiting},
	}
	for _, tt := range tests {
		if got := Classify(tt.r, newChart); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

func TestSnapshotAdmitsInOrder(t *testing.T) {
	var rs []Resource
	for i := range 10 {
		rs = append(rs, res(fmt.Sprintf("r%d", i), nil))
	}
	rs[2] = res("r2", onNew("deployed", false)) // in progress
	rs[3] = res("r3", onNew("deployed", true))  // done
	rs[4].Held = true                           // paused: skipped
	b := Budget{MaxUnavailable: intstr.FromInt32(3), MaxFailures: 1}
	s := NewSnapshot(rs, newChart, b, map[types.NamespacedName]bool{key("r0"): true})
	// r0 reserved and r2 in progress take 2 of 3 slots: one is free, for r1.
	if s.Free() != 1 || s.Counts[StateInProgress] != 2 || s.Counts[StateUpgraded] != 1 || s.Counts[StateWaiting] != 7 || s.Total != 10 {
		t.Fatalf("free %d, counts %v, total %d", s.Free(), s.Counts, s.Total)
	}
	if !s.Admits(key("r1")) || s.Admits(key("r5")) || s.Admits(key("r9")) {
		t.Errorf("admits r1 %v, r5 %v, r9 %v; want only r1", s.Admits(key("r1")), s.Admits(key("r5")), s.Admits(key("r9")))
	}
	if n := s.Next(); len(n) != 1 || n[0] != key("r1") {
		t.Errorf("next %v, want [ns/r1]", n)
	}
	if w := s.Waiting(); len(w) != 6 {
		t.Errorf("waiting candidates %v, want 6 (r1, r5..r9; r4 held)", w)
	}
	// A failure halts it: nothing is admitted, nobody is next.
	rs[2] = res("r2", onNew("failed", false))
	s = NewSnapshot(rs, newChart, b, nil)
	if !s.Halted() || s.Admits(key("r1")) || len(s.Next()) != 0 || len(s.Failed) != 1 || s.Failed[0] != "ns/r2" {
		t.Errorf("halted %v, admits r1 %v, next %v, failed %v", s.Halted(), s.Admits(key("r1")), s.Next(), s.Failed)
	}
	// maxFailures 2: one failure still admits; it takes a slot, and the
	// two free go to r0 and r1 (r2 failed, r3 done, r4 held).
	b.MaxFailures = 2
	s = NewSnapshot(rs, newChart, b, nil)
	if s.Halted() || s.Free() != 2 || !s.Admits(key("r0")) || !s.Admits(key("r1")) || s.Admits(key("r5")) {
		t.Errorf("maxFailures 2: halted %v, free %d", s.Halted(), s.Free())
	}
}

func TestSnapshotPercentOfTotal(t *testing.T) {
	var rs []Resource
	for i := range 30 {
		rs = append(rs, res(fmt.Sprintf("r%02d", i), nil))
	}
	rs = append(rs, res("fresh", func(r *Resource) { r.Revision = 0 })) // not in the rollout
	s := NewSnapshot(rs, newChart, DefaultBudget(), nil)
	if s.Total != 30 || s.Free() != 8 {
		t.Fatalf("total %d free %d, want 30 and 8 (25%% rounded up)", s.Total, s.Free())
	}
	if !s.Admits(key("r07")) || s.Admits(key("r08")) {
		t.Errorf("admits r07 %v r08 %v; want the first 8 by name", s.Admits(key("r07")), s.Admits(key("r08")))
	}
}
