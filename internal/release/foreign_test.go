package release

import (
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
)

// A revision is foreign when it is the latest, finished, and newer than
// every revision the resource knows; it is the same when deployed with the
// watch's chart and the resource's values, and then adopted, not undone.
func TestJudgeForeign(t *testing.T) {
	chrt := &chart.Chart{Metadata: &chart.Metadata{Name: "nginx", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}, Values: map[string]any{"a": 1.0}}
	// Helm's --reuse-values rewrites the recorded chart's default values.
	reused := &chart.Chart{Metadata: chrt.Metadata, Templates: chrt.Templates, Values: map[string]any{"a": 1.0, "b": "x"}}
	other := &chart.Chart{Metadata: chrt.Metadata, Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: Secret")}}}
	want := Desired{ValuesDigest: ValuesDigest(map[string]any{"t": "spec"}), ChartDigest: ChartDigest(chrt)}
	at := func(v int, st release.Status, c *chart.Chart, vals map[string]any) *release.Release {
		r := rev(v, st, time.Now())
		r.Chart, r.Config, r.Info.Description = c, vals, "Upgrade complete"
		return r
	}
	spec, byHand := map[string]any{"t": "spec"}, map[string]any{"t": "by hand"}
	tests := []struct {
		name     string
		latest   *release.Release
		known    int
		foreign  bool
		same     bool
		wantPlan Plan
	}{
		{"known revision", at(3, release.StatusDeployed, chrt, byHand), 3, false, false, PlanUpgrade},
		{"nothing known yet (adoption, install)", at(3, release.StatusDeployed, chrt, byHand), 0, false, false, PlanUpgrade},
		{"pending: a lock, not a revision yet", at(4, release.StatusPendingUpgrade, chrt, byHand), 3, false, false, PlanLocked},
		{"being uninstalled: a lock", at(4, release.StatusUninstalling, chrt, byHand), 3, false, false, PlanLocked},
		{"new values by hand", at(4, release.StatusDeployed, chrt, byHand), 3, true, false, PlanUpgrade},
		{"another chart by hand, its label copied", at(4, release.StatusDeployed, other, spec), 3, true, false, PlanUpgrade},
		{"failed by hand", at(4, release.StatusFailed, chrt, spec), 3, true, false, PlanUpgrade},
		{"the same chart and values by hand", at(4, release.StatusDeployed, chrt, spec), 3, true, true, PlanReapply},
		{"the same, with --reuse-values", at(4, release.StatusDeployed, reused, spec), 3, true, true, PlanReapply},
	}
	deployed := at(2, release.StatusDeployed, chrt, spec)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Helm copies the labels of the revision it upgrades from.
			tt.latest.Labels[LabelChartDigest] = want.ChartDigest
			st := State{Latest: tt.latest, Deployed: deployed}
			if tt.latest.Info.Status == release.StatusDeployed {
				st.Deployed = tt.latest
			}
			if tt.latest.Info.Status.IsPending() {
				st.Lock = &Lock{Revision: tt.latest.Version, Status: tt.latest.Info.Status}
			}
			f := JudgeForeign(st, tt.known, want, chrt)
			if (f != nil) != tt.foreign || (f != nil && f.Same != tt.same) {
				t.Fatalf("JudgeForeign = %+v, want foreign %v same %v", f, tt.foreign, tt.same)
			}
			if f != nil && (f.Revision != tt.latest.Version || f.Description != "Upgrade complete") {
				t.Errorf("JudgeForeign = %+v", f)
			}
			st.Foreign = f
			if got := Decide(st, want); got != tt.wantPlan {
				t.Errorf("Decide = %s, want %s", got, tt.wantPlan)
			}
		})
	}
}

// Writes tells this process' own writes from someone else's, and gives every
// watch that sees the same event the same answer.
func TestWritesTellOwnFromForeign(t *testing.T) {
	w := NewWrites()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return now }
	w.Wrote("ns", "sh.helm.release.v1.web.v2", "pending-upgrade")
	w.Wrote("ns", "sh.helm.release.v1.web.v1", "")

	if !w.Own("ns", "sh.helm.release.v1.web.v2", "10", "pending-upgrade") {
		t.Error("the process' own create is taken for someone else's")
	}
	if !w.Own("ns", "sh.helm.release.v1.web.v2", "10", "pending-upgrade") {
		t.Error("a second watch of the same event gets another answer")
	}
	if w.Own("ns", "sh.helm.release.v1.web.v2", "11", "deployed") {
		t.Error("an update the process did not write is taken for its own")
	}
	if w.Own("ns", "sh.helm.release.v1.web.v2", "12", "pending-upgrade") {
		t.Error("one write consumed twice")
	}
	if !w.Own("ns", "sh.helm.release.v1.web.v1", "13", "") || w.Own("other", "sh.helm.release.v1.web.v1", "13", "") {
		t.Error("deletions are not told apart by namespace")
	}
	// A write whose event never came is forgotten in time.
	w.Wrote("ns", "sh.helm.release.v1.web.v3", "deployed")
	now = now.Add(writeMemory + time.Minute)
	if w.Own("ns", "sh.helm.release.v1.web.v3", "20", "deployed") {
		t.Error("a write is remembered for ever")
	}
	var none *Writes
	none.Wrote("ns", "x", "deployed")
	if none.Own("ns", "x", "1", "deployed") {
		t.Error("a nil Writes knows a write")
	}
}

// The steering annotations are the operator's prefixes but the retry
// annotation, in one canonical form.
func TestSteeringAnnotations(t *testing.T) {
	a := SteeringAnnotations(map[string]string{AnnotationUpgradeForce: "maybe", AnnotationPaused: "true",
		AnnotationRetry: "1", "example.com/x": "y", "helmapp.io/future": "z"})
	b := SteeringAnnotations(map[string]string{"helmapp.io/future": "z", AnnotationPaused: "true", AnnotationUpgradeForce: "maybe"})
	if a != b {
		t.Errorf("SteeringAnnotations depends on the retry annotation, other prefixes or order:\n%q\n%q", a, b)
	}
	if !strings.Contains(a, AnnotationUpgradeForce) || strings.Contains(a, "example.com") || strings.Contains(a, AnnotationRetry) {
		t.Errorf("SteeringAnnotations = %q", a)
	}
	if SteeringAnnotations(map[string]string{AnnotationUpgradeForce: "true"}) == SteeringAnnotations(nil) {
		t.Error("adding an annotation does not change SteeringAnnotations")
	}
}
