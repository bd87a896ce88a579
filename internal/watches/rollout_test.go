package watches

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestLoadRollout(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: Default, chart: CHART}
- {group: g, version: v1, kind: Count, chart: CHART, rollout: {maxUnavailable: 5, maxFailures: 2}}
- {group: g, version: v1, kind: Percent, chart: CHART, rollout: {maxUnavailable: 10%}}
- {group: g, version: v1, kind: Quoted, chart: CHART, rollout: {maxUnavailable: "3"}}
- {group: g, version: v1, kind: Everything, chart: CHART, rollout: {maxUnavailable: 100%, maxFailures: 0}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		mu       intstr.IntOrString
		failures int
	}{
		{intstr.FromString("25%"), 1},
		{intstr.FromInt32(5), 2},
		{intstr.FromString("10%"), 1},
		{intstr.FromInt32(3), 1},
		{intstr.FromString("100%"), 0},
	}
	for i, w := range want {
		got := ws[i].Rollout
		if got.MaxUnavailable != w.mu || got.MaxFailures != w.failures {
			t.Errorf("%s: rollout %s, want maxUnavailable %s, maxFailures %d", ws[i].Kind, got, w.mu.String(), w.failures)
		}
	}
	if ws[0].Rollout.Unbounded() || !ws[4].Rollout.Unbounded() {
		t.Errorf("only maxUnavailable 100%% with maxFailures 0 is unbounded: default %v, 100%% %v", ws[0].Rollout.Unbounded(), ws[4].Rollout.Unbounded())
	}
}
