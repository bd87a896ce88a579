package operator_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestPreflightRequests counts the SubjectAccessReviews of the permission
// preflight on the real API server: a burst of installs in one namespace
// makes one per (verb, resource) of the chart, shared by all, so at most one
// per install; a reconcile that finds nothing to change makes none, even in
// a new process whose cache of answers is empty.
func TestPreflightRequests(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "preflight")
	var reviews atomic.Int64
	counted := tu.RecordRequests(cfg, func(r tu.Request) {
		if r.Method == http.MethodPost && r.Path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" {
			reviews.Add(1)
		}
	})
	start := func() func() {
		return operatortest.Start(t, counted, tu.DefaultWatches(t), []string{ns}, func(c *operator.Config) {
			c.MaxConcurrentReconciles = 4
		})
	}
	stop := start()

	const n = 6
	for i := range n {
		if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, fmt.Sprintf("echo-%d", i), map[string]any{"message": "hi"})); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		tu.WaitForCondition(t, c, tu.EchoGVK, ns, fmt.Sprintf("echo-%d", i), status.TypeReady, metav1.ConditionTrue, "")
	}
	// The echo chart: a ConfigMap and a Deployment, each read and created.
	if got := reviews.Load(); got != 4 {
		t.Errorf("%d SubjectAccessReviews for %d installs, want 4 (create and get of configmaps and of deployments.apps, once each)", got, n)
	}

	stop()
	reviews.Store(0)
	before := echoReconciles(t)
	start()
	// Each resource is reconciled when the new process starts: wait until
	// n reconciles have returned (controller-runtime counts them then).
	tu.Eventually(t, time.Minute, "the new process to reconcile every resource", func() (bool, string) {
		got := echoReconciles(t) - before
		return got >= n, fmt.Sprintf("%v reconciles", got)
	})
	if got := reviews.Load(); got != 0 {
		t.Errorf("%d SubjectAccessReviews in no-op reconciles, want 0", got)
	}
}

// echoReconciles is how many reconciles of Echo resources have returned in this
// process, by controller-runtime's own metric.
func echoReconciles(t *testing.T) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "echo.web.helmapp.io" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
