package bench

import (
	"strings"
	"testing"
)

func TestCheckAcceptsACompleteRun(t *testing.T) {
	if err := sampleResults(true).Check(3); err != nil {
		t.Errorf("Check: %v", err)
	}
	if err := sampleResults(false).Check(3); err != nil {
		t.Errorf("Check with an equal-concurrency run: %v", err)
	}
}

func TestCheckNamesAMissingFigure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(*Results)
		want  string
	}{
		{"no Ready time", func(r *Results) { r.Runs[0].AllReadySeconds = 0 }, "ours (defaults): no time to all Ready"},
		{"no RSS", func(r *Results) { r.Runs[1].RSSAfterSecrets = 0 }, "baseline (defaults): no RSS after the unrelated Secrets"},
		{"latencies short", func(r *Results) { r.Runs[1].LatencySeconds = r.Runs[1].LatencySeconds[:1] }, "3 spec-change latencies (has 1)"},
		{"no floor", func(r *Results) { r.Floors = nil }, "N=10: 0 floor runs, want 1"},
		{"no baseline run", func(r *Results) { r.Runs = r.Runs[:1] }, "N=10: 0 runs of baseline at its defaults, want 1"},
		{"install cost not measured", func(r *Results) { r.Runs[0].InstallCost = Cost{} }, "ours (defaults): no install CPU and allocation"},
		{"no install allocation", func(r *Results) { r.Runs[1].InstallCost.OperatorAllocBytes = 0 }, "baseline (defaults): no install operator allocation"},
		{"restart cost not measured", func(r *Results) { r.Runs[1].Restarted.Cost.Measured = false }, "baseline (defaults): no restart CPU and allocation"},
		{"no restart allocation", func(r *Results) { r.Runs[0].Restarted.Cost.OperatorAllocBytes = 0 }, "ours (defaults): no restart operator allocation"},
		{"floor cost not measured", func(r *Results) { r.Floors[0].Cost = Cost{} }, "N=10 round 1: no floor CPU and allocation"},
		{"no status writes", func(r *Results) { r.Runs[0].Install.ByKey = map[string]int{} }, "ours (defaults): no status writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := sampleResults(true)
			tc.spoil(&res)
			err := res.Check(3)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
