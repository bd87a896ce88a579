package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/helmapp/helm-app-operator/internal/rollout"
)

// RolloutResources is the metric of the staged rollouts of new charts.
const RolloutResources = "helmapp_rollout_resources"

// newRolloutGauge is helmapp_rollout_resources: per kind and state, never
// per resource, so a kind has at most four series.
func newRolloutGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: RolloutResources,
		Help: "Resources of a kind in the rollout of its chart (watches.yaml rollout) by state: waiting (on the old chart), in_progress (upgrading, or upgraded and not yet Ready), upgraded (on the new chart and Ready), failed (failed on the new chart).",
	}, []string{"kind", "state"})
}

// RolloutResources records how many resources of kind are in each state of
// the rollout of its chart, as the coordinator last counted them.
func (r *Recorder) RolloutResources(kind string, counts map[rollout.State]int) {
	if r == nil {
		return
	}
	for _, st := range rollout.States {
		r.rollout.WithLabelValues(kind, string(st)).Set(float64(counts[st]))
	}
}
