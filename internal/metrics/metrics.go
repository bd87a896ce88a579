// Package metrics holds the operator's own Prometheus metrics: what the
// reconciles ended with, how long Helm's actions took, each resource's state
// and the release deployed for it. They are registered on
// controller-runtime's registry, so the manager's metrics endpoint serves
// them next to controller-runtime's.
//
// Every label value is a kind, a namespace, a name, a condition status or
// reason, an action, a revision or a chart name and version: never values,
// manifests or messages. Series are bounded: a resource has at most two
// (helmapp_resource_info, helmapp_release_info), each replaced when its labels
// change and deleted when the resource is gone (Forget).
package metrics

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Metric names; docs/metrics.md describes each.
const (
	ReconcileTotal     = "helmapp_reconcile_total"
	HelmActionDuration = "helmapp_helm_action_duration_seconds"
	ResourceInfo       = "helmapp_resource_info"
	ReleaseInfo        = "helmapp_release_info"
)

// Results of a reconcile (label result of helmapp_reconcile_total).
const (
	ResultSuccess = "success"
	ResultError   = "error"
	ResultStalled = "stalled"
	ResultHeld    = "held"
)

// Outcomes of a Helm action (label outcome of helmapp_helm_action_duration_seconds).
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// Recorder records the operator's metrics. Its methods are safe for
// concurrent use; a nil *Recorder records nothing.
type Recorder struct {
	reconciles *prometheus.CounterVec
	actions    *prometheus.HistogramVec
	resources  *resourceCollector
	rollout    *prometheus.GaugeVec
}

// New returns a Recorder whose metrics are registered on reg (the manager's
// is controller-runtime's metrics.Registry). Several Recorders on one
// registry, as several managers of one test process make, share the
// registered metrics.
func New(reg prometheus.Registerer) (*Recorder, error) {
	r := &Recorder{}
	var err error
	if r.reconciles, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: ReconcileTotal,
		Help: "Reconciles of helm-app-operator resources by kind, result (success, error, stalled, held) and reason (the failure's, else Ready's).",
	}, []string{"kind", "result", "reason"})); err != nil {
		return nil, err
	}
	if r.actions, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    HelmActionDuration,
		Help:    "Duration of Helm actions (install, upgrade, rollback, uninstall, test) by kind, action and outcome (success, failure), hooks and waits included.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"kind", "action", "outcome"})); err != nil {
		return nil, err
	}
	if r.resources, err = register(reg, newResourceCollector()); err != nil {
		return nil, err
	}
	if r.rollout, err = register(reg, newRolloutGauge()); err != nil {
		return nil, err
	}
	return r, nil
}

// register registers c on reg, or returns the collector already registered
// under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Reconciled records the end of a reconcile of obj (of kind) that left the
// status s: the reconcile counter and the resource's two series, its state
// (helmapp_resource_info) and its deployed release (helmapp_release_info),
// each replacing the resource's series of the same name whose labels
// differ. err is the reconcile's failure, nil on success; held tells a
// reconcile that ran nothing (paused, backing off, out of retries).
func (r *Recorder) Reconciled(kind string, obj client.Object, s status.Status, err *status.Failure, held bool) {
	if r == nil {
		return
	}
	result, reason := ResultSuccess, ""
	if c := findCondition(s.Conditions, status.TypeReady); c != nil {
		reason = c.Reason
	}
	switch {
	case err != nil && err.Terminal():
		result, reason = ResultStalled, err.StalledReason
	case err != nil:
		result, reason = ResultError, err.Reason
	case held:
		result = ResultHeld
	}
	r.reconciles.WithLabelValues(kind, result, reason).Inc()

	key := resourceKey{kind, obj.GetNamespace(), obj.GetName()}
	series := resourceSeries{info: state(s.Conditions)}
	if d := s.DeployedRelease; d != nil {
		series.release = []string{strconv.Itoa(d.Revision), d.Chart, d.ChartVersion}
	}
	r.resources.set(key, series)
}

// Forget deletes every series of the resource namespace/name of kind: it is gone.
func (r *Recorder) Forget(kind, namespace, name string) {
	if r == nil {
		return
	}
	r.resources.forget(resourceKey{kind, namespace, name})
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// ObserveAction records a Helm action of a release of a resource of kind
// that took d and ended with err; it is a release.ActionObserver.
func (r *Recorder) ObserveAction(kind, action string, d time.Duration, err error) {
	if r == nil {
		return
	}
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeFailure
	}
	r.actions.WithLabelValues(kind, action, outcome).Observe(d.Seconds())
}
