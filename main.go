// Command manager runs helm-app-operator: one controller per entry of
// watches.yaml, each turning resources of its kind into Helm releases of its
// chart and reporting the truth about them in the resource's status.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

func main() {
	var c operator.Config
	var watchesFile string
	flag.StringVar(&watchesFile, "watches-file", "watches.yaml", "Path to the watches file; chart paths in it are relative to the working directory.")
	flag.StringVar(&c.MetricsBindAddress, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to, served over HTTPS to callers whose bearer token may get /metrics (TokenReview, SubjectAccessReview); \"0\" disables it.")
	flag.StringVar(&c.MetricsCertDir, "metrics-cert-dir", "", "Directory with the metrics endpoint's tls.crt and tls.key; empty means a self-signed certificate.")
	flag.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to; \"0\" disables them.")
	flag.StringVar(&c.PprofBindAddress, "pprof-bind-address", "0", "Address Go's /debug/pprof profiles are served on (unauthenticated: bind it to localhost); \"0\" disables them.")
	flag.BoolVar(&c.LeaderElection, "leader-elect", false, "Enable leader election, so that only one replica reconciles at a time.")
	flag.StringVar(&c.LeaderElectionID, "leader-election-id", operator.DefaultLeaderElectionID, "Name of the Lease used for leader election; with --watch-label-selector, a short hash of the selector is appended, so that shards do not contend for one Lease.")
	flag.StringVar(&c.WatchLabelSelector, "watch-label-selector", "", "Label selector (e.g. helmapp.io/shard=a, or !helmapp.io/shard) restricting every cache of the operator to the resources it selects and their release objects and records: one shard (docs/sharding.md); empty means all.")
	flag.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the operator's own namespace.")
	flag.DurationVar(&c.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a standby waits, after the leader's last renewal of the Lease, before it takes over: the longest a dead leader (SIGKILL, node failure) holds up reconciling.")
	flag.DurationVar(&c.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew the Lease before it gives up leadership and exits; shorter than --leader-election-lease-duration.")
	flag.DurationVar(&c.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often candidates try to acquire, and the leader to renew, the Lease.")
	flag.IntVar(&c.MaxConcurrentReconciles, "max-concurrent-reconciles", operator.DefaultMaxConcurrentReconciles, "Default number of resources of one kind reconciled at once; a watch's maxConcurrentReconciles overrides it.")
	flag.DurationVar(&c.ReconcilePeriod, "reconcile-period", time.Minute, "Default interval at which a settled resource is reconciled again to correct drift; a watch's reconcilePeriod overrides it.")
	flag.DurationVar(&c.ReadinessTimeout, "readiness-timeout", 5*time.Minute, "Default time a release's objects may take to become ready after a deployment before the resource is reported Stalled (ProgressDeadlineExceeded); a watch's readinessTimeout overrides it; 0 disables.")
	flag.DurationVar(&c.Timeout, "helm-timeout", 5*time.Minute, "Default bound of every Helm action (install, upgrade, rollback, uninstall), each hook included, and the age after which a pending release lock is stale; a watch's timeout overrides it.")
	var qps float64
	flag.Float64Var(&qps, "kube-api-qps", defaultKubeAPIQPS, "Requests per second the whole operator may send to the API server, a client-side limit shared by all its clients; 0 sets none and leaves the pacing to the API server's priority and fairness. Unset, the default holds only until the API server shows it applies priority and fairness; a value given is kept.")
	flag.IntVar(&c.KubeAPIBurst, "kube-api-burst", defaultKubeAPIBurst, "Requests the operator may send at once above --kube-api-qps; when only --kube-api-qps is given, twice it (0 with --kube-api-qps=0).")
	zapOpts := zap.Options{}
	flag.StringVar(&c.DefaultServiceAccount, "default-service-account", "", "ServiceAccount, in each resource's own namespace, that the Helm actions of watches setting no serviceAccount act as (impersonated); a resource's annotation helmapp.io/service-account wins; empty means the operator's own identity.")
	flag.BoolVar(&c.RequireServiceAccount, "require-service-account", false, "Refuse to act for a resource that names no ServiceAccount and whose watch sets none (Stalled=True ServiceAccountRequired): nothing is written with the operator's own power. Same as --service-accounts=required.")
	var serviceAccounts string
	flag.StringVar(&serviceAccounts, "service-accounts", operator.ServiceAccountsOff, "Per-resource ServiceAccounts (docs/tenancy.md): off, the operator acts only as itself and needs no impersonate (a resource or watch naming a ServiceAccount is Stalled=True ServiceAccountsDisabled); allowed, a resource's annotation helmapp.io/service-account, its watch's serviceAccount or --default-service-account names one to act as (impersonated: the Role must grant impersonate on serviceaccounts, config/service-accounts); required, every resource must (config/tenancy). --default-service-account implies allowed, --require-service-account required.")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := operator.SetServiceAccounts(&c, serviceAccounts, set["service-accounts"]); err != nil {
		fail(err)
	}
	c.KubeAPIQPS, c.KubeAPIBurst, c.LiftRateLimitsUnderAPF = rateLimits(set["kube-api-qps"], set["kube-api-burst"], qps, c.KubeAPIBurst)
	if err := operator.ValidateRateLimits(c.KubeAPIQPS, c.KubeAPIBurst); err != nil {
		fail(err)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	// The collector's target is Go's (GOGC=100) unless GOGC is set: with
	// Helm's records gzipped by writers the operator keeps, an install
	// allocates a third of what it did when GOGC=50 was chosen, and
	// collecting twice as often cost about a sixth more of the operator's CPU
	// per install for 10 MB less resident memory at N = 500 (docs/performance.md).
	if os.Getenv("GOMEMLIMIT") == "" {
		// In a container with a memory limit, Go's soft limit is 90 % of it
		// (memlimit.go): the collector works harder near the limit instead of
		// the container being killed. GOMEMLIMIT set in the environment wins.
		if limit := defaultMemoryLimit(cgroupMemoryFiles); limit > 0 {
			debug.SetMemoryLimit(limit)
		}
	}
	log := ctrl.Log.WithName("setup")
	c.WatchNamespaces = operator.ParseNamespaces(os.Getenv("WATCH_NAMESPACE"))
	c.OperatorNamespace = os.Getenv("POD_NAMESPACE")

	// A bad watches file stops the operator before anything else, with a
	// message naming the entry and the field.
	ws, err := watches.Load(watchesFile)
	if err != nil {
		fail(err)
	}
	gogc, memLimit := collectorSettings()
	log.Info("Garbage collector", "GOGC", gogc, "GOMEMLIMIT", memLimit)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(fmt.Errorf("no Kubernetes configuration: %w", err))
	}
	mgr, err := operator.New(cfg, c, ws)
	if err != nil {
		fail(err)
	}
	if len(c.WatchNamespaces) == 0 {
		log.Info("Watching all namespaces")
	} else {
		log.Info("Watching namespaces", "namespaces", c.WatchNamespaces)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(err)
	}
}

// fail prints err on one line to stderr and exits non-zero: a start-up error
// must be readable without a log parser.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
