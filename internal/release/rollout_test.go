package release

import (
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
)

func TestChartChangeOnly(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	deployed := rev(1, release.StatusDeployed, now)
	failed := rev(2, release.StatusFailed, now)
	newChart := Desired{ValuesDigest: ValuesDigest(map[string]any{}), ChartDigest: "new"}
	tests := []struct {
		name string
		st   State
		want Desired
		only bool
	}{
		{"deployed, chart changed", State{Latest: deployed, Deployed: deployed}, newChart, true},
		{"deployed as asked", State{Latest: deployed, Deployed: deployed}, Desired{ValuesDigest: newChart.ValuesDigest, ChartDigest: "c"}, false},
		{"values changed too", State{Latest: deployed, Deployed: deployed}, Desired{ValuesDigest: "other", ChartDigest: "new"}, false},
		{"failed upgrade retried", State{Latest: failed, Deployed: deployed}, newChart, false},
		{"never installed", State{}, newChart, false},
		{"foreign revision undone", State{Latest: deployed, Deployed: deployed, Foreign: &Foreign{}}, newChart, false},
		{"foreign revision that changed nothing", State{Latest: deployed, Deployed: deployed, Foreign: &Foreign{Same: true}}, newChart, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChartChangeOnly(tt.st, tt.want); got != tt.only {
				t.Errorf("ChartChangeOnly = %v, want %v", got, tt.only)
			}
		})
	}
}
