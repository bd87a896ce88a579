package reconciler

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/rollout"
)

// Options configure a Reconciler: the settings of its kind and the
// services of the process. New validates the Kind once.
type Options struct {
	Kind Kind
	// Services are shared by every reconciler of the process; they come
	// from NewServices.
	Services *Services
}

// Kind is what the watch of one kind says (watches.yaml).
type Kind struct {
	// GVK is the watched kind.
	GVK schema.GroupVersionKind
	// Chart is the chart every resource of the kind is released from.
	Chart *release.Chart
	// OverrideValues are set on top of each resource's spec (watches.yaml overrideValues).
	OverrideValues map[string]string
	// ReconcilePeriod re-runs a settled resource's reconcile to correct drift; 0 disables it.
	ReconcilePeriod time.Duration
	// MaxHistory bounds the revisions kept per release; 0 means release.DefaultMaxHistory.
	MaxHistory int
	// ReadinessTimeout is how long after a deployment the release's objects
	// may take to become ready before the resource is Stalled; 0: no limit.
	ReadinessTimeout time.Duration
	// RequireAddresses makes a LoadBalancer Service or an Ingress without an
	// address block readiness (watches.yaml requireAddresses); otherwise it
	// is only a warning (status.resources.warnings).
	RequireAddresses bool
	// HealthChecks are the CEL rules that judge the objects of the kinds
	// they name (watches.yaml healthChecks, readiness.Rules); nil: none.
	HealthChecks *readiness.Rules
	// Remediation says what follows a failed install or upgrade (watches.yaml
	// installRemediation, upgradeRemediation).
	Remediation release.Remediation
	// UninstallWait keeps a deleted resource's finalizer until the objects of
	// its release are gone (watches.yaml uninstallWait).
	UninstallWait bool
	// Finalizer is when a resource gets Finalizer (watches.yaml finalizer):
	// release.FinalizerAuto ("" too) or release.FinalizerAlways.
	Finalizer release.FinalizerPolicy
	// CRDs is what installs and upgrades do with the chart's crds/ (watches.yaml crds).
	CRDs release.CRDPolicy
	// Tests says whether the chart's test hooks run after each successful
	// install or upgrade (watches.yaml test).
	Tests release.TestPolicy
	// Timeout bounds every Helm action of the kind's releases, each hook
	// included, and is the age after which a pending lock is stale; 0 means
	// release.DefaultTimeout.
	Timeout time.Duration
	// MaxRetries bounds the consecutive failed installs and upgrades of one
	// generation before the resource is Stalled; 0 means no bound.
	MaxRetries int
	// Rollout stages the upgrades a new chart causes across the kind's
	// resources (watches.yaml rollout, rollout.go); nil stages nothing.
	Rollout *rollout.Budget
	// Identity is who the Helm actions act as (identity.go).
	Identity release.IdentityPolicy
	// Scope is what the releases may hold beyond their namespace
	// (watches.yaml scope; release.Scope).
	Scope release.Scope
	// Drift is what a re-apply does with drift (watches.yaml drift;
	// release.DriftPolicy).
	Drift release.DriftPolicy
	// ValuesFrom are the watch's references (watches.yaml valuesFrom),
	// merged before each resource's own valuesFrom.
	ValuesFrom []release.ValuesReference
	// SensitiveValues are the watch's paths of secret values (watches.yaml
	// sensitiveValues), redacted beside those the chart's schema marks.
	SensitiveValues []string
}

// Services are what every reconciler of the process shares, built once
// (NewServices): the clients, the registries and the process-wide settings.
type Services struct {
	// Client reads and writes the watched resources.
	Client client.Client
	// Cache reads the watched resources from the manager's cache (see
	// fetch); nil reads them with Client.
	Cache client.Reader
	// Reader reads the release's objects for their readiness and the drift
	// check: the manager's APIReader, or a dependents.Reader over it that
	// serves them from the cache of labelled objects. RESTMapper tells their
	// scope.
	Reader     client.Reader
	RESTMapper meta.RESTMapper
	// Live reads a release's object uncached, with its managedFields, once
	// the drift check found it drifted (who changed what); nil means Reader.
	Live client.Reader
	// Recorder emits the events of the status contract.
	Recorder events.EventRecorder
	// Tracker is shared with the Reader and the dependents' watches: what
	// the reconciles have read of the releases' objects (see
	// dependents.Tracker). Nil when dependent watches are off.
	Tracker *dependents.Tracker
	// Warnings holds the API server's warnings on the writes of each
	// resource's Helm actions (filled by the transport of its action
	// client): emitted as APIWarning events at the action, and the cause
	// of an object that is not Current. Nil keeps none.
	Warnings *readiness.Warnings
	// Subresources tells which kinds are custom resources served with a
	// status subresource, remembered for the process: such an object that
	// reported no status is NoStatusReported. Nil: kstatus' verdict stands.
	Subresources *readiness.StatusSubresources
	// ActionClientGetter gives the Helm action client of a resource.
	ActionClientGetter release.ClientGetter
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ShardKeys are the label keys of the operator's --watch-label-selector:
	// a resource's values for them are carried by its release's revisions
	// and objects (release.Shard). Empty without a selector.
	ShardKeys []string
	// Shard is the operator's --watch-label-selector, nil without one: a
	// resource it does not select is not this instance's.
	Shard labels.Selector
	// ShutdownGrace is how long a running action may go on once the
	// operator is stopping; 0 means release.DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Actions is the process' registry of running Helm actions and Tenure
	// since when it is the one reconciling; nil means new ones.
	Actions *release.Actions
	Tenure  *release.Tenure
	// Writes is the process' memory of its own writes to Helm's storage,
	// shared with the storage drivers, so that the storage watch wakes a
	// resource only for what someone else wrote; nil: every change to the
	// storage is taken for someone else's.
	Writes *release.Writes
	// Records reads the metadata cache of Helm's release records, indexed
	// by RecordIndex, and Memo holds the settled revision of each release
	// (release.Memo): with both, a reconcile of a settled release reads
	// nothing from the API server (settled.go). Either nil: every reconcile
	// reads the release's history.
	Records client.Reader
	Memo    *release.Memo
	// RetryBase and RetryMax bound the backoff of retryable failures: the
	// n-th consecutive failure is retried after RetryBase*2^(n-1), at most
	// RetryMax. Zero means 1s and 5m.
	RetryBase, RetryMax time.Duration
	// Reporter is told how every reconcile ended (metrics); nil: nobody.
	Reporter Reporter
	// Access reviews the permissions of the Helm actions' identities and
	// Writers gives the client that writes as one (identity.go).
	Access  release.Reviewer
	Writers func(release.Identity) (client.Client, error)
	// Sources is the cache through which the Secrets and ConfigMaps of the
	// watched namespaces are watched by their metadata, started only once a
	// resource has valuesFrom (values.go); nil: their changes are seen at
	// the next reconcile only.
	Sources cache.Cache
	// DigestKey keys deployedRelease.valuesDigest (release.DigestKey); nil
	// means a random key of this process alone.
	DigestKey release.DigestKey

	// release is the part of these services a release's run uses, built
	// from them by NewServices.
	release *release.Services
}

// NewServices returns s with its defaults set, or an error naming the
// missing service.
func NewServices(s Services) (*Services, error) {
	switch {
	case s.Client == nil:
		return nil, errors.New("reconciler: Client is required")
	case s.ActionClientGetter == nil:
		return nil, errors.New("reconciler: ActionClientGetter is required")
	case s.Recorder == nil:
		return nil, errors.New("reconciler: Recorder is required")
	case s.Reader == nil || s.RESTMapper == nil:
		return nil, errors.New("reconciler: Reader and RESTMapper are required")
	}
	if s.RetryBase <= 0 {
		s.RetryBase = time.Second
	}
	if s.RetryMax <= 0 {
		s.RetryMax = 5 * time.Minute
	}
	s.release = release.NewServices(release.Services{Kube: s.Client, KubeReader: s.Reader, Live: s.Live, Access: s.Access,
		Actions: s.Actions, Tenure: s.Tenure, Now: s.Now, ShutdownGrace: s.ShutdownGrace, DigestKey: s.DigestKey})
	s.Now, s.Actions, s.Tenure = s.release.Now, s.release.Actions, s.release.Tenure
	return &s, nil
}

// check validates the kind's settings.
func (k Kind) check() error {
	switch {
	case k.GVK.Kind == "" || k.GVK.Version == "":
		return errors.New("reconciler: GVK needs a version and a kind")
	case k.Chart == nil:
		return errors.New("reconciler: Chart is required")
	case k.ReconcilePeriod < 0:
		return fmt.Errorf("reconciler: ReconcilePeriod %s is negative", k.ReconcilePeriod)
	case k.MaxRetries < 0:
		return fmt.Errorf("reconciler: MaxRetries %d is negative", k.MaxRetries)
	}
	return nil
}
