package operator

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/storage"
)

// capabilitiesTTL is how long the cluster's capabilities (its version and API
// versions, which charts read as .Capabilities) are reused before they are
// read again. A chart that tests for an API installed meanwhile sees it
// within this time.
const capabilitiesTTL = time.Minute

// sharedCapabilities gives every Helm action configuration the cluster's
// capabilities read at most once per capabilitiesTTL. Helm reads them anew
// for each action configuration, invalidating the discovery cache each time:
// /version, /api and /apis on every install and upgrade. Nothing else of the
// configuration is shared, so concurrent actions touch no common state but
// the capabilities, which Helm only reads.
//
// It also takes from each configuration what costs requests and tells
// nothing: the reachability probe of every action (see unprobedKube) and the
// repeated lists of one release's history within one action (see
// storage.Memoize, which is per configuration, so per reconcile).
type sharedCapabilities struct {
	inner helmclient.ActionConfigGetter
	now   func() time.Time
	// writes is told of every write to Helm's storage (ownWritesDriver).
	writes *release.Writes
	// actions is the registry of running actions, whose waits a newer
	// generation preempts (preemptibleKube).
	actions *release.Actions
	// created, when set, keeps the objects the actions create as the API
	// server returned them (createdKeeper).
	created *dependents.Tracker

	// validators are the manifests' validators (validator.go).
	validators sharedValidators
	// failures says once which API groups' discovery fails (discovery.go).
	failures discoveryFailures

	mu   sync.Mutex
	caps *chartutil.Capabilities
	at   time.Time
}

func newSharedCapabilities(inner helmclient.ActionConfigGetter, now func() time.Time, writes *release.Writes, actions *release.Actions, log logr.Logger) *sharedCapabilities {
	return &sharedCapabilities{inner: inner, now: now, writes: writes, actions: actions, validators: sharedValidators{now: now},
		failures: discoveryFailures{log: log}}
}

func (s *sharedCapabilities) ActionConfigFor(ctx context.Context, obj client.Object) (*action.Configuration, error) {
	cfg, err := s.inner.ActionConfigFor(ctx, obj)
	if err != nil {
		return nil, err
	}
	// On failure Helm reads them itself, and reports its own error.
	if caps, err := s.capabilities(cfg); err == nil {
		cfg.Capabilities = caps
	}
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		kc.Factory = s.validators.factory(kc.Factory)
	}
	cfg.KubeClient = preemptible(withoutProbe(cfg.KubeClient), s.actions, s.created, obj.GetNamespace(), obj.GetName())
	if cfg.Releases != nil && cfg.Releases.Driver != nil {
		// Outside the driver Config.WrapStorage returned: its injected
		// failures are errors, never memoized (see storage.Memoize).
		cfg.Releases.Driver = storage.Memoize(ownWritesDriver{Driver: cfg.Releases.Driver, writes: s.writes, namespace: obj.GetNamespace()})
	}
	return cfg, nil
}

// capabilities returns the cluster's capabilities, read again when the
// last reading is capabilitiesTTL old. A group whose discovery fails (an
// unavailable APIService) is left out, and logged once (discoveryFailures).
func (s *sharedCapabilities) capabilities(cfg *action.Configuration) (*chartutil.Capabilities, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.caps != nil && now.Sub(s.at) < capabilitiesTTL {
		return s.caps, nil
	}
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	dc.Invalidate()
	v, err := dc.ServerVersion()
	if err != nil {
		return nil, err
	}
	// Helm's GetVersionSet uses a partial discovery and drops its error;
	// the groups that failed are read from the call it makes.
	read := &groupsRead{ServerResourcesInterface: dc}
	apis, err := action.GetVersionSet(read)
	if err != nil {
		return nil, err
	}
	if err := s.failures.partial(read.err); err != nil {
		return nil, err
	}
	s.caps = &chartutil.Capabilities{
		APIVersions: apis,
		KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	s.at = now
	return s.caps, nil
}
