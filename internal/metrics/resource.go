package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// resourceKey names a resource.
type resourceKey struct{ kind, namespace, name string }

// resourceSeries is what a resource's two series say beyond the resource:
// the values of state for helmapp_resource_info, and the revision, chart
// and chart version for helmapp_release_info (nil: no release deployed, no
// series).
type resourceSeries struct{ info, release []string }

// resourceCollector serves helmapp_resource_info and helmapp_release_info
// from the latest resourceSeries of each resource. A scrape reads them all
// under one lock, so it sees each resource's state before or after a
// change, never two series of one metric for it nor none.
type resourceCollector struct {
	info, release *prometheus.Desc

	mu     sync.Mutex
	series map[resourceKey]resourceSeries
}

func newResourceCollector() *resourceCollector {
	resource := []string{"kind", "namespace", "name"}
	return &resourceCollector{
		info: prometheus.NewDesc(ResourceInfo,
			"1 for each resource, labelled with its state: Ready's status and reason, and whether it is stalled, reconciling and paused.",
			append(resource, "ready", "reason", "stalled", "reconciling", "paused"), nil),
		release: prometheus.NewDesc(ReleaseInfo,
			"1 for the Helm release deployed for a resource: its revision, chart and chart version.",
			append(resource, "revision", "chart", "chart_version"), nil),
		series: map[resourceKey]resourceSeries{},
	}
}

func (c *resourceCollector) set(k resourceKey, s resourceSeries) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.series[k] = s
}

func (c *resourceCollector) forget(k resourceKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.series, k)
}

// Describe implements prometheus.Collector.
func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.release
}

// Collect implements prometheus.Collector.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.series {
		resource := []string{k.kind, k.namespace, k.name}
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, append(resource, s.info...)...)
		if s.release != nil {
			ch <- prometheus.MustNewConstMetric(c.release, prometheus.GaugeValue, 1, append(resource, s.release...)...)
		}
	}
}

// maxReasonLength bounds a reason label value; the reasons of the status
// contract are far shorter.
const maxReasonLength = 64

// state returns the values of the state labels of helmapp_resource_info
// (ready, reason, stalled, reconciling, paused) for the conditions conds:
// each a condition status (True, False, Unknown) or a reason, both of the
// bounded vocabulary of internal/status. A condition the resource does not
// have is Unknown, except Paused, which is False when absent (its contract).
// A reason that is not a CamelCase word of the contract's shape becomes
// Unknown, so that no label value can ever carry free text.
func state(conds []metav1.Condition) []string {
	st := func(t, absent string) string {
		c := findCondition(conds, t)
		if c == nil {
			return absent
		}
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse:
			return string(c.Status)
		}
		return string(metav1.ConditionUnknown)
	}
	reason := string(metav1.ConditionUnknown)
	if c := findCondition(conds, status.TypeReady); c != nil && isReasonWord(c.Reason) {
		reason = c.Reason
	}
	unknown := string(metav1.ConditionUnknown)
	return []string{
		st(status.TypeReady, unknown), reason,
		st(status.TypeStalled, unknown), st(status.TypeReconciling, unknown),
		st(status.TypePaused, string(metav1.ConditionFalse)),
	}
}

// isReasonWord tells a reason of the shape metav1.Condition requires and
// the status contract uses: a letter, then letters and digits, bounded.
func isReasonWord(r string) bool {
	if r == "" || len(r) > maxReasonLength {
		return false
	}
	for i, c := range r {
		letter := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
