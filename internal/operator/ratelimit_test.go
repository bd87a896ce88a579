package operator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// TestClientRateLimits builds managers with --kube-api-qps and
// --kube-api-burst as main.go passes them: with limits, the manager's REST
// config (from which its cache, its clients and every Helm client are copied)
// carries them and one token bucket of that rate, and the caller's config is
// left as it was; without, the caller's config is used as is; bad values are
// refused; and an operator with limits installs a resource to Ready.
func TestClientRateLimits(t *testing.T) {
	ws, err := watches.Load(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	base := operator.Config{MaxConcurrentReconciles: 1, MetricsBindAddress: "0", HealthProbeBindAddress: "0", SkipNameValidation: true}
	callerQPS, callerBurst := cfg.QPS, cfg.Burst

	limited := base
	limited.KubeAPIQPS, limited.KubeAPIBurst = 40, 80
	mgr, err := operator.New(cfg, limited, ws)
	if err != nil {
		t.Fatal(err)
	}
	got := mgr.GetConfig()
	if got.QPS != 40 || got.Burst != 80 || got.RateLimiter == nil || got.RateLimiter.QPS() != 40 {
		t.Errorf("manager's REST config: QPS %v, burst %d, rate limiter %v; want 40, 80 and a limiter of 40/s", got.QPS, got.Burst, got.RateLimiter)
	}
	if cfg.QPS != callerQPS || cfg.Burst != callerBurst || cfg.RateLimiter != nil {
		t.Errorf("the caller's REST config changed: QPS %v, burst %d, rate limiter %v", cfg.QPS, cfg.Burst, cfg.RateLimiter)
	}

	mgr, err = operator.New(cfg, base, ws)
	if err != nil {
		t.Fatal(err)
	}
	if got := mgr.GetConfig(); got.QPS != callerQPS || got.Burst != callerBurst || got.RateLimiter != nil {
		t.Errorf("without limits, the manager's REST config has QPS %v, burst %d, rate limiter %v; want the caller's %v, %d, none",
			got.QPS, got.Burst, got.RateLimiter, callerQPS, callerBurst)
	}

	for _, bad := range []struct {
		qps   float32
		burst int
		want  string
	}{
		{-1, 10, "--kube-api-qps must be positive"},
		{10, 0, "needs a positive --kube-api-burst"},
		{0, 10, "needs --kube-api-qps"},
		{10, -2, "--kube-api-burst must be positive"},
	} {
		c := base
		c.KubeAPIQPS, c.KubeAPIBurst = bad.qps, bad.burst
		if _, err := operator.New(cfg, c, ws); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("QPS %v, burst %d: error %v, want one containing %q", bad.qps, bad.burst, err, bad.want)
		}
	}

	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "ratelimit")
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns}, func(oc *operator.Config) {
		oc.KubeAPIQPS, oc.KubeAPIBurst = 40, 80
	})
	if err := c.Create(context.Background(), tu.NewCR(tu.EchoGVK, ns, "echo", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
}

// TestDefaultRateLimitsLiftedUnderPriorityAndFairness builds managers as
// main.go does when no flag sets the limits (400/s, burst 800, lifted under
// priority and fairness) and when flags set them: against a kube-apiserver
// that applies priority and fairness (its default), the defaults are lifted
// at the first response, said once in the log, while limits a flag chose
// stay; against one started with --enable-priority-and-fairness=false, the
// defaults stay.
func TestDefaultRateLimitsLiftedUnderPriorityAndFairness(t *testing.T) {
	ws, err := watches.Load(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	// limitAfterARequest builds a manager against restConfig and returns the
	// limit in force after one request of a client made from its config, and
	// what its logger said.
	limitAfterARequest := func(t *testing.T, restConfig *rest.Config, lift bool) (float32, string) {
		var mu sync.Mutex
		var logged strings.Builder
		logger := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&logged, "%s %s\n", prefix, args)
		}, funcr.Options{})
		c := operator.Config{MaxConcurrentReconciles: 1, MetricsBindAddress: "0", HealthProbeBindAddress: "0", SkipNameValidation: true,
			KubeAPIQPS: 400, KubeAPIBurst: 800, LiftRateLimitsUnderAPF: lift, Logger: &logger}
		mgr, err := operator.New(restConfig, c, ws)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return mgr.GetConfig().RateLimiter.QPS(), logged.String()
	}
	const said = "client-side rate limit lifted: the API server applies priority and fairness"

	t.Run("priority and fairness, the defaults", func(t *testing.T) {
		if qps, logged := limitAfterARequest(t, cfg, true); qps != 0 || !strings.Contains(logged, said) {
			t.Errorf("limit after a request: %v/s, log %q; want none, and the log saying %q", qps, logged, said)
		}
	})
	t.Run("priority and fairness, limits a flag chose", func(t *testing.T) {
		if qps, logged := limitAfterARequest(t, cfg, false); qps != 400 || strings.Contains(logged, said) {
			t.Errorf("limit after a request: %v/s, log %q; want 400/s, and nothing lifted", qps, logged)
		}
	})
	t.Run("no priority and fairness, the defaults", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		noAPF, err := controlplane.Start(ctx, controlplane.Options{
			CRDDirectoryPaths: []string{filepath.Join(tu.RepoRoot(), "config", "crd", "bases")},
			APIServerArgs:     map[string]string{"enable-priority-and-fairness": "false"},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := noAPF.Stop(); err != nil {
				t.Error(err)
			}
		}()
		if qps, logged := limitAfterARequest(t, noAPF.Config, true); qps != 400 || strings.Contains(logged, said) {
			t.Errorf("limit after a request: %v/s, log %q; want 400/s, and nothing lifted", qps, logged)
		}
	})
}
