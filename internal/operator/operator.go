// Package operator wires the operator together: it loads watches.yaml, builds
// the manager and registers one reconciler per watched kind. main.go parses
// flags into a Config and calls New; tests call New against envtest.
package operator

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/storage"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// Config is what main.go's flags and environment say.
type Config struct {
	// WatchNamespaces restricts the operator to these namespaces; empty means all.
	WatchNamespaces []string
	// MaxConcurrentReconciles and ReconcilePeriod are the defaults for watches
	// that do not set their own.
	MaxConcurrentReconciles int
	ReconcilePeriod         time.Duration

	// MetricsBindAddress is where the metrics endpoint listens, over HTTPS,
	// answering only requests whose bearer token the API server authenticates
	// (TokenReview) and authorizes for GET /metrics (SubjectAccessReview);
	// "0" or empty disables it. MetricsCertDir holds its tls.crt and tls.key
	// (e.g. from OpenShift's service CA); empty means a self-signed certificate.
	MetricsBindAddress     string
	MetricsCertDir         string
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles, for measuring the
	// operator; "0" or empty (the default) disables it.
	PprofBindAddress string
	LeaderElection   bool
	// LeaderElectionID is the Lease's name; with WatchLabelSelector set, a
	// short hash of the selector is appended (sharding.go).
	LeaderElectionID        string
	LeaderElectionNamespace string
	// OperatorNamespace is the operator's own namespace (POD_NAMESPACE),
	// where the key of the values digests is kept (digestkey.go); empty
	// means the leader election namespace, else the pod's namespace.
	OperatorNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election
	// (leaderelection.go); zero means controller-runtime's 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// WatchLabelSelector (--watch-label-selector) restricts every cache of
	// the operator to the resources it selects and to their release objects
	// and records: one shard of the resources (docs/sharding.md). Empty
	// means all resources.
	WatchLabelSelector string

	// ReadinessTimeout is the default for watches that set no readinessTimeout.
	ReadinessTimeout time.Duration

	// Timeout is the default for watches that set no timeout: the bound of
	// every Helm action and hook, and the age after which a pending lock is
	// stale. Zero means release.DefaultTimeout (5m).
	Timeout time.Duration
	// ShutdownGrace is how long a running Helm action may go on after
	// SIGTERM before it is cancelled (and recorded failed by Helm); zero means
	// release.DefaultShutdownGrace (30s). The manager waits shutdownMargin
	// more for the cancelled action to be recorded and the status written.
	ShutdownGrace time.Duration

	// RetryBase and RetryMax bound the backoff of failed reconciles; zero
	// means the reconciler's defaults (1s doubling up to 5m).
	RetryBase, RetryMax time.Duration

	// DefaultServiceAccount is the ServiceAccount, in each resource's own
	// namespace, that the Helm actions of watches that set no serviceAccount
	// act as (impersonated); empty means the operator's own identity. A
	// resource's annotation helmapp.io/service-account wins over both.
	DefaultServiceAccount string
	// RequireServiceAccount refuses to act for a resource that has no
	// ServiceAccount (Stalled=True ServiceAccountRequired): no chart object
	// is ever written with the operator's own power.
	RequireServiceAccount bool
	// ServiceAccounts switches per-resource ServiceAccounts on
	// (--service-accounts=allowed or required): only then may a resource's
	// annotation helmapp.io/service-account or a watch's serviceAccount
	// name one, and only then does the operator impersonate, which its Role
	// must grant (config/tenancy, config/service-accounts). Off, a resource
	// that names one is Stalled=True ServiceAccountsDisabled.
	// DefaultServiceAccount and RequireServiceAccount switch it on.
	ServiceAccounts bool

	// KubeAPIQPS and KubeAPIBurst limit the requests of the whole process to
	// the API server on the client side (withRateLimits); 0 and 0 (the
	// default) leave the REST config's own limits: none from main.go.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// LiftRateLimitsUnderAPF lifts those limits at the first response that
	// shows the API server applies priority and fairness: main.go sets it
	// when no flag chose them (its defaults bound an API server without).
	LiftRateLimitsUnderAPF bool

	// SkipNameValidation lets several managers with the same controllers run
	// in one process, as tests do.
	SkipNameValidation bool
	// Logger replaces controller-runtime's global logger for this manager.
	Logger *logr.Logger

	// Test hooks that wrap real parts to inject faults a real server cannot
	// produce on demand. Nil in production.
	//
	// WrapClient wraps the client the reconcilers read and write resources with.
	WrapClient func(client.Client) client.Client
	// WrapReader wraps the uncached reader the reconcilers read the
	// releases' objects with (readiness, drift, deletion).
	WrapReader func(client.Reader) client.Reader
	// WrapLive wraps the uncached reader of a drifted object, read again
	// for its managedFields (who changed it).
	WrapLive func(client.Reader) client.Reader
	// WrapActionClientGetter wraps the getter of each resource's Helm client.
	WrapActionClientGetter func(helmclient.ActionClientGetter) helmclient.ActionClientGetter
	// WrapStorage wraps the release storage driver (internal/storage, storage.Mapper). The memo of
	// each action configuration (storage.Memoize) wraps what it returns, so every
	// list that reaches the server passes through it, and a list it fails is
	// never remembered.
	WrapStorage func(driver.Driver) driver.Driver
	// WrapPreload wraps the list of a namespace's deployed release records
	// that fills the memo of settled revisions after a restart
	// (release.Loader).
	WrapPreload func(release.Loader) release.Loader
	// WrapRecords wraps the reader of the metadata cache of Helm's release
	// records that passes observe a settled release with (a view that lags
	// behind the API server).
	WrapRecords func(client.Reader) client.Reader
}

// The dependents package implements Helm's post-renderer without importing
// Helm (the operator's own runs its labelling, postrender.go).
var _ postrender.PostRenderer = dependents.Labeler{}

// DefaultLeaderElectionID is the Lease name used when none is given.
const DefaultLeaderElectionID = "helm-app-operator.helmapp.io"

// shutdownMargin is how long the manager waits, past ShutdownGrace, for a
// cancelled Helm action to record its failure and the status to be written.
const shutdownMargin = 10 * time.Second

// DefaultMaxConcurrentReconciles is how many resources of one kind are
// reconciled at once unless configured. A reconcile mostly waits on the API
// server, not on the operator's CPU; on the 2-CPU machine of make bench, 8
// installed 300 resources in 10.5 s, against 18 s with 2 (the number of CPUs)
// and 11 s with 16 (docs/performance.md).
const DefaultMaxConcurrentReconciles = 8

// ParseNamespaces reads WATCH_NAMESPACE: a comma-separated list, blanks
// ignored; empty means every namespace.
func ParseNamespaces(env string) []string {
	var out []string
	for _, ns := range strings.Split(env, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// New returns a manager with one controller per watched kind of ws, as
// loaded by watches.Load: the configuration checked, the manager, the
// services every reconciler of the process shares, then one reconciler per
// watch.
func New(restConfig *rest.Config, c Config, ws []watches.Watch) (ctrl.Manager, error) {
	c, sh, err := checkConfig(c)
	if err != nil {
		return nil, err
	}
	log := ctrl.Log
	if c.Logger != nil {
		log = *c.Logger
	}
	restConfig, err = withRateLimits(restConfig, c.KubeAPIQPS, c.KubeAPIBurst, c.LiftRateLimitsUnderAPF, log.WithName("ratelimit"))
	if err != nil {
		return nil, err
	}
	// A test-only crash point, installed only when its variables are set (crashpoint.go).
	if restConfig, err = withCrashPoint(restConfig, os.Getenv); err != nil {
		return nil, err
	}
	// A test-only perturbation of the informers' watches, installed only
	// when its variable is set (viewfault.go).
	if restConfig, err = withViewFault(restConfig, os.Getenv); err != nil {
		return nil, err
	}
	mgr, namespaces, err := newManager(restConfig, c, sh)
	if err != nil {
		return nil, err
	}
	key, err := newDigestKey(mgr, c, log.WithName("digestkey"))
	if err != nil {
		return nil, err
	}
	svc, err := newServices(mgr, c, ws, sh, namespaces, key)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if err := addReconciler(mgr, c, w, svc); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// checkConfig rejects a configuration the operator cannot run with, fills
// in the defaults and parses the shard's label selector.
func checkConfig(c Config) (Config, shard, error) {
	if c.MaxConcurrentReconciles < 1 {
		return c, shard{}, fmt.Errorf("max concurrent reconciles must be at least 1, got %d", c.MaxConcurrentReconciles)
	}
	if c.ReconcilePeriod < 0 {
		return c, shard{}, fmt.Errorf("reconcile period must not be negative, got %s", c.ReconcilePeriod)
	}
	if c.Timeout < 0 || c.ShutdownGrace < 0 {
		return c, shard{}, fmt.Errorf("timeout (%s) and shutdown grace (%s) must not be negative", c.Timeout, c.ShutdownGrace)
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = release.DefaultShutdownGrace
	}
	if sa := c.DefaultServiceAccount; sa != "" {
		if errs := validation.IsDNS1123Subdomain(sa); len(errs) > 0 {
			return c, shard{}, fmt.Errorf("--default-service-account must name a ServiceAccount, got %q: %s", sa, errs[0])
		}
	}
	// Both name or demand a ServiceAccount for every resource: meaningless
	// without impersonation, so they switch it on.
	c.ServiceAccounts = c.ServiceAccounts || c.DefaultServiceAccount != "" || c.RequireServiceAccount
	if err := validateLeaderElection(c.LeaseDuration, c.RenewDeadline, c.RetryPeriod); err != nil {
		return c, shard{}, err
	}
	sh, err := parseShard(c.WatchLabelSelector)
	return c, sh, err
}

// newManager creates the controller-runtime manager: metrics, probes,
// leader election and its caches (scoped to the watched namespaces and the
// shard). It returns the watched namespaces (nil: all).
func newManager(restConfig *rest.Config, c Config, sh shard) (ctrl.Manager, map[string]cache.Config, error) {
	id := c.LeaderElectionID
	if id == "" {
		id = DefaultLeaderElectionID
	}
	id = sh.leaseID(id)
	opts := ctrl.Options{
		Metrics:                 metricsOptions(c),
		HealthProbeBindAddress:  orDisabled(c.HealthProbeBindAddress),
		PprofBindAddress:        orDisabled(c.PprofBindAddress),
		LeaderElection:          c.LeaderElection,
		LeaderElectionID:        id,
		LeaderElectionNamespace: c.LeaderElectionNamespace,
		LeaseDuration:           positive(c.LeaseDuration),
		RenewDeadline:           positive(c.RenewDeadline),
		RetryPeriod:             positive(c.RetryPeriod),
		// controller-runtime cancels the reconciles' context at once on
		// SIGTERM and waits this long for them: a running Helm action gets
		// ShutdownGrace to finish, then is cancelled and recorded failed.
		GracefulShutdownTimeout: ptr(c.ShutdownGrace + shutdownMargin),
		Controller:              config.Controller{SkipNameValidation: ptr(c.SkipNameValidation)},
	}
	if c.Logger != nil {
		opts.Logger = *c.Logger
	}
	// Helm's release records are watched (for names that free up) by their
	// metadata only, and only those: no Secret's data is ever cached.
	opts.Cache.ByObject = map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: reconciler.ReleaseRecordSelector},
	}
	// No cached object keeps its managedFields (cachetransform.go).
	opts.Cache.DefaultTransform = cacheTransform
	sh.scope(&opts.Cache)
	// The Roles and RoleBindings that wake refused resources are watched by
	// their metadata, whatever the shard: they carry no shard labels.
	for _, o := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		opts.Cache.ByObject[o] = cache.ByObject{Label: labels.Everything()}
	}
	if len(c.WatchNamespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range c.WatchNamespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(restConfig, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, nil, err
	}
	return mgr, opts.Cache.DefaultNamespaces, nil
}

// services are what every reconciler of the process shares, built once:
// the Helm action client getter, the registries (running actions, tenure,
// the operator's own storage writes, the memo of settled revisions), the
// clients and readers, the metrics and the permission reviews.
type services struct {
	// shared is what the reconcilers get (reconciler.NewServices).
	shared *reconciler.Services
	// depCache is the cache of the releases' objects, nil when no watch
	// watches them.
	depCache cache.Cache
}

// newServices builds the services of mgr for the watches ws.
func newServices(mgr ctrl.Manager, c Config, ws []watches.Watch, sh shard, namespaces map[string]cache.Config, key release.DigestKey) (*services, error) {
	// Helm's actions act as each resource's identity; its storage, the
	// resources, events and caches stay the operator's (tenancy.go). Each
	// kind's releases are stored as its watch says (internal/storage, storage.Mapper).
	ids := newIdentities(mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), c, ws)
	access := newAccessReviewer(mgr.GetConfig(), mgr.GetHTTPClient(), time.Now)
	chunked := map[schema.GroupVersionKind]bool{}
	for _, w := range ws {
		chunked[w.GroupVersionKind] = w.Storage == watches.StorageChunked
	}
	// The API server's warnings on the writes of each resource's Helm
	// actions, kept for its status and events (apiwarnings.go).
	warned := readiness.NewWarnings()
	acgOpts := []helmclient.ActionConfigGetterOption{
		helmclient.ClientRestConfigMapper(recordWarnings(ids.restConfig, warned, mgr.GetRESTMapper())),
		helmclient.StorageDriverMapper(storage.Mapper(chunked, c.WrapStorage)),
	}
	acg, err := helmclient.NewActionConfigGetter(mgr.GetConfig(), mgr.GetRESTMapper(), acgOpts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Helm action config getter: %w", err)
	}
	// Failed installs and upgrades are not rolled back behind the user's back:
	// the failed revision stays in the history and the status says so.
	// Every write to Helm's storage is remembered, so that the storage watch
	// wakes resources for the writes of others only.
	writes := release.NewWrites()
	// The registry of running actions; a newer generation of a resource
	// preempts the waits of its running action (release.Actions.Supersede).
	actions := release.NewActions()
	caps := newSharedCapabilities(acg, time.Now, writes, actions, mgr.GetLogger().WithName("discovery"))
	// Every object of a release is labelled, so that a label-scoped cache can
	// watch it, and owned by the resource, in one post-renderer (postrender.go).
	var pass onePass
	getter, err := helmclient.NewActionClientGetter(caps, helmclient.WithFailureRollbacks(false),
		helmclient.AppendPostRenderers(pass.provider(sh.labelsOf, scopes(ws))))
	if err != nil {
		return nil, fmt.Errorf("creating the Helm action client getter: %w", err)
	}
	getter = pass.getter(getter)

	depCache, err := dependentCache(mgr, namespaces, sh.and(dependents.Selector()), ws)
	if err != nil {
		return nil, err
	}
	sources, err := sourcesCache(mgr, namespaces)
	if err != nil {
		return nil, err
	}
	// A pending lock written before this process became the one reconciling
	// is stale: the tenure begins at start and again when it wins leader
	// election (at once without leader election).
	tenure := release.NewTenure(time.Now())
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-mgr.Elected():
			tenure.Begin(time.Now())
		case <-ctx.Done():
		}
		return nil
	})); err != nil {
		return nil, err
	}
	// Each reconcile finds its release's records in the metadata cache by
	// this index; the memo holds each settled release's latest revision
	// (release.Memo), so that a reconcile with nothing to do reads nothing.
	records := &metav1.PartialObjectMetadata{}
	records.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), records, reconciler.RecordIndex, reconciler.RecordIndexValue); err != nil {
		return nil, fmt.Errorf("indexing Helm's release records: %w", err)
	}
	// After a restart, the first miss of the memo in a namespace lists the
	// namespace's deployed records of the shard in pages, as the operator
	// (release.ListDeployed): a restart costs a few lists, not one read per
	// resource.
	load := release.ListDeployed(mgr.GetAPIReader(), sh.and(release.DeployedRecordSelector))
	if c.WrapPreload != nil {
		load = c.WrapPreload(load)
	}
	memo := release.NewPreloadingMemo(load,
		func(ns string, err error) {
			mgr.GetLogger().Info("listing the deployed release records failed; each is read alone", "namespace", ns, "error", err.Error())
		})
	rec, err := metrics.New(ctrlmetrics.Registry)
	if err != nil {
		return nil, fmt.Errorf("registering the metrics: %w", err)
	}
	actions.ObserveWith(rec.ObserveAction)
	cl, resources, reader, tracker, err := newClients(mgr, c, depCache)
	if err != nil {
		return nil, err
	}
	// Before the manager starts: no action has a configuration yet.
	caps.created = tracker
	if c.WrapActionClientGetter != nil {
		getter = c.WrapActionClientGetter(getter)
	}
	live := mgr.GetAPIReader()
	if c.WrapLive != nil {
		live = c.WrapLive(live)
	}
	var recordsView client.Reader = mgr.GetCache()
	if c.WrapRecords != nil {
		recordsView = c.WrapRecords(recordsView)
	}
	// Which custom resources have a status subresource, from discovery
	// (readiness.StatusSubresources: NoStatusReported).
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	subresources := readiness.NewStatusSubresources(mgr.GetRESTMapper(), dc)
	shared, err := reconciler.NewServices(reconciler.Services{
		Client: cl, Cache: resources, Reader: reader, Live: live, RESTMapper: mgr.GetRESTMapper(),
		Recorder: mgr.GetEventRecorder("helm-app-operator"), Tracker: tracker, Warnings: warned,
		ActionClientGetter: getter, ShardKeys: sh.keys, Shard: sh.selector,
		ShutdownGrace: c.ShutdownGrace, Actions: actions, Tenure: tenure, Writes: writes,
		Records: recordsView, Memo: memo, RetryBase: c.RetryBase, RetryMax: c.RetryMax,
		Reporter: rec, Access: access, Writers: ids.writer, Subresources: subresources,
		Sources: sources, DigestKey: key,
	})
	if err != nil {
		return nil, err
	}
	return &services{shared: shared, depCache: depCache}, nil
}

// newClients returns the clients every reconciler shares: cl writes (and
// reads what is not cached), resources reads the watched resources from the
// manager's cache, reader reads the releases' objects (from depCache, told
// by tracker, when there is one).
func newClients(mgr ctrl.Manager, c Config, depCache cache.Cache) (cl, resources client.Client, reader client.Reader, tracker *dependents.Tracker, err error) {
	cl = mgr.GetClient()
	if c.WrapClient != nil {
		cl = c.WrapClient(cl)
	}
	reader = mgr.GetAPIReader()
	if depCache != nil {
		// The releases' objects are read from the cache that watches them.
		tracker = dependents.NewTracker()
		reader = dependents.Reader{Cache: depCache, Live: reader, Tracker: tracker}
	}
	if c.WrapReader != nil {
		reader = c.WrapReader(reader)
	}
	// The watched resources are read from the manager's cache, which the
	// controllers' watches fill (the manager's client reads unstructured
	// objects from the API server).
	resources, err = client.New(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{Reader: mgr.GetCache(), Unstructured: true},
	})
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("creating the cached client: %w", err)
	}
	if c.WrapClient != nil {
		resources = c.WrapClient(resources)
	}
	return cl, resources, reader, tracker, nil
}

// addReconciler adds the reconciler of the watch w to mgr.
func addReconciler(mgr ctrl.Manager, c Config, w watches.Watch, svc *services) error {
	r, err := reconciler.New(reconciler.Options{Kind: kindOf(w, c), Services: svc.shared})
	if err != nil {
		return err
	}
	if *w.WatchDependentResources {
		r.WatchDependents(svc.depCache)
	}
	if err := r.SetupWithManager(mgr, w.Concurrency(c.MaxConcurrentReconciles), w.Selector); err != nil {
		return fmt.Errorf("setting up the controller of %s: %w", w.GroupVersionKind, err)
	}
	return nil
}

// kindOf is what the watch w says of its kind, with c's defaults.
func kindOf(w watches.Watch, c Config) reconciler.Kind {
	return reconciler.Kind{
		GVK:              w.GroupVersionKind,
		Chart:            w.Chart,
		OverrideValues:   w.OverrideValues,
		ReconcilePeriod:  w.Period(c.ReconcilePeriod),
		ReadinessTimeout: w.Readiness(c.ReadinessTimeout),
		RequireAddresses: w.RequireAddresses,
		HealthChecks:     w.HealthChecks,
		Remediation: release.Remediation{
			RollbackFailedUpgrade:  w.UpgradeRemediation == watches.UpgradeRemediationRollback,
			UninstallFailedInstall: w.InstallRemediation == watches.InstallRemediationUninstall,
		},
		UninstallWait: w.UninstallWait,
		Finalizer:     release.FinalizerPolicy(w.Finalizer),
		CRDs:          release.CRDPolicy{Install: w.CRDInstall, Upgrade: w.CRDUpgrade},
		Tests:         release.TestPolicy{Enable: w.Test.Enable, Timeout: testTimeout(w), IgnoreFailures: w.Test.IgnoreFailures},
		MaxRetries:    w.Retries(),
		Timeout:       w.ActionTimeout(c.Timeout),
		Rollout:       &w.Rollout,
		Identity:      policyOf(w, c),
		Scope:         scopeOf(w),
		Drift:         driftOf(w),
		ValuesFrom:    valuesFromOf(w),
		// Redacted beside what the chart's schema marks secret.
		SensitiveValues: w.SensitiveValues,
	}
}

// scopeOf is the release scope of the watch w (watches.yaml scope).
func scopeOf(w watches.Watch) release.Scope {
	rules := func(in []watches.ScopeRule) []release.ScopeRule {
		var out []release.ScopeRule
		for _, r := range in {
			out = append(out, release.ScopeRule{Group: r.Group, Kind: r.Kind, Namespaces: r.Namespaces, Names: r.Names})
		}
		return out
	}
	return release.Scope{ClusterScoped: rules(w.Scope.ClusterScoped), Namespaced: rules(w.Scope.Namespaces)}
}

// scopes are the release scopes of the watches' kinds, for the post-renderer.
func scopes(ws []watches.Watch) map[schema.GroupVersionKind]release.Scope {
	m := map[schema.GroupVersionKind]release.Scope{}
	for _, w := range ws {
		m[w.GroupVersionKind] = scopeOf(w)
	}
	return m
}

// dependentCache returns the one cache, restricted to the objects the operator
// labelled, through which changes to release objects reach their owner; nil
// when no watch asks for dependent watches.
func dependentCache(mgr ctrl.Manager, namespaces map[string]cache.Config, selector labels.Selector, ws []watches.Watch) (cache.Cache, error) {
	wanted := false
	for _, w := range ws {
		wanted = wanted || *w.WatchDependentResources
	}
	if !wanted {
		return nil, nil
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultNamespaces:    namespaces,
		DefaultLabelSelector: selector,
		DefaultTransform:     cacheTransform,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of release objects: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}

// metricsOptions serves the metrics endpoint over HTTPS behind
// controller-runtime's authentication and authorization filter.
func metricsOptions(c Config) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    orDisabled(c.MetricsBindAddress),
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        c.MetricsCertDir,
	}
}

func orDisabled(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

func ptr[T any](v T) *T { return &v }

// testTimeout is the watch's test.timeout, 0 (the action timeout) when unset.
func testTimeout(w watches.Watch) time.Duration {
	if w.Test.Timeout != nil {
		return w.Test.Timeout.Duration
	}
	return 0
}
