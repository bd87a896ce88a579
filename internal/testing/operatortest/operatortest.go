// Package operatortest runs the operator in-process for the envtest suites
// that test it whole (internal/operator, internal/reconciler,
// internal/metrics, the bundle's install tests). It is apart from
// internal/testing/testutil so that the tests of the packages the operator
// is built from (release, readiness, dependents, ...) do not link it.
package operatortest

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// Start runs the operator in-process on cfg until the test ends, or until
// stop is called: stop cancels the manager and waits for it to return, as a
// process that is shut down does. mutate adjusts the manager's
// configuration.
func Start(t testing.TB, cfg *rest.Config, watchesPath string, namespaces []string, mutate ...func(*operator.Config)) (stop func()) {
	t.Helper()
	ws, err := watches.Load(watchesPath)
	if err != nil {
		t.Fatalf("loading watches: %v", err)
	}
	c := operator.Config{
		WatchNamespaces:         namespaces,
		MaxConcurrentReconciles: 2,
		ReconcilePeriod:         time.Minute,
		MetricsBindAddress:      "0",
		HealthProbeBindAddress:  "0",
		SkipNameValidation:      true,
	}
	for _, m := range mutate {
		m(&c)
	}
	mgr, err := operator.New(cfg, c, ws)
	if err != nil {
		t.Fatalf("creating the operator: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("operator stopped with an error: %v", err)
		}
	}()
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return stop
}
