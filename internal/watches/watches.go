// Package watches loads watches.yaml: operator-sdk's format, read by
// helm-operator-plugins' pkg/watches, after a strict pass of our own that names
// the entry and the field of any mistake, so that a bad file stops the operator
// at start with a message a user can act on.
package watches

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	hopwatches "github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart/loader"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/rollout"
)

// Watch is one entry of watches.yaml: the fields operator-sdk defines, loaded
// by helm-operator-plugins (chart loaded, override values expanded from the
// environment, defaults applied).
type Watch struct {
	hopwatches.Watch
	// ReadinessTimeout, our extension of the format, is how long after a
	// deployment the release's objects may take to become ready before the
	// resource is reported Stalled.
	ReadinessTimeout *metav1.Duration
	// UpgradeRemediation is what follows a failed upgrade: UpgradeRemediationNone
	// (the failed revision stays on top of the deployed one) or
	// UpgradeRemediationRollback (roll back to the last deployed revision).
	UpgradeRemediation string
	// InstallRemediation is what follows a failed install:
	// InstallRemediationNone (the next attempt upgrades over it) or
	// InstallRemediationUninstall (uninstall it; the next attempt is a fresh install).
	InstallRemediation string
	// UninstallWait keeps a deleted resource's finalizer until the objects of
	// its release are gone, not only until Helm issued their deletion.
	UninstallWait bool
	// Finalizer is when a resource gets the finalizer that uninstalls its
	// release on deletion: FinalizerAuto (only where the garbage collector
	// cannot do the uninstall's job, release.NeedsFinalizer) or
	// FinalizerAlways (every resource, as earlier versions did).
	Finalizer string
	// MaxRetries, our extension, bounds the consecutive failed installs and
	// upgrades of one generation before the resource is Stalled
	// (RetriesExhausted); nil means DefaultMaxRetries, 0 no bound.
	MaxRetries *int
	// Timeout, our extension, bounds every Helm action of the watch's
	// releases (install, upgrade, rollback, uninstall, each hook included)
	// and is the age after which a pending release lock is stale.
	Timeout *metav1.Duration
	// ServiceAccount, our extension, names the ServiceAccount, in each
	// resource's own namespace, that every Helm action of the watch's
	// releases acts as (impersonated); empty means the manager's
	// --default-service-account, or the operator's own identity.
	ServiceAccount string
	// ValuesFrom, our extension, are the Secrets' and ConfigMaps' keys
	// merged into the values of every resource of the kind, before the
	// resource's own valuesFrom.
	ValuesFrom []ValuesFrom
	// SensitiveValues, our extension, are the dotted paths of the values
	// (spec included) that are secret, "*" for any key or list item: they
	// are redacted from every message, beside what the chart's
	// values.schema.json marks secret (release.SensitivePaths).
	SensitiveValues []string
	// Storage, our extension, is where the kind's releases are stored:
	// StorageSecrets (Helm's driver, one Secret per revision, the default) or
	// StorageChunked (helm-operator-plugins' chunked driver, for revisions
	// over the 1 MiB of one Secret).
	Storage string
	// CRDInstall and CRDUpgrade, our extension (crds: {install, upgrade}),
	// are what an install and an upgrade do with the chart's crds/:
	// CRDInstall Create (default) or Skip; CRDUpgrade Skip (default), Create
	// or CreateReplace.
	CRDInstall, CRDUpgrade string
	// Test, our extension (test: {enable, timeout, ignoreFailures}), runs
	// the chart's test hooks after each successful install or upgrade.
	Test Test
	// Rollout, our extension (rollout: {maxUnavailable, maxFailures}),
	// stages the upgrades a chart change causes across the kind's resources
	// (docs/rollout.md); rollout.DefaultBudget when unset.
	Rollout rollout.Budget
	// Scope, our extension (scope: {clusterScoped, namespaces}), is what
	// the releases may create beyond their own namespace; nothing when
	// unset (scope.go).
	Scope Scope
	// Drift, our extension (drift: {mode, ignore}), is what a re-apply
	// does with drift (drift.go).
	Drift Drift
	// RequireAddresses, our extension, makes a LoadBalancer Service or an
	// Ingress without an address in status.loadBalancer block readiness;
	// when false (the default) it is only a warning (status.resources.warnings).
	RequireAddresses bool
	// HealthChecks, our extension (healthChecks: [{apiVersion, kind,
	// current, inProgress, failed, message, optional}]), are the CEL rules
	// that judge the readiness of the objects of the kinds they name,
	// compiled when the file is loaded (health.go); nil: none.
	HealthChecks *readiness.Rules
}

// Test is the test field of a watch entry.
type Test struct {
	// Enable runs the chart's test hooks after each successful install or
	// upgrade, and when the annotation helmapp.io/test gets a new value.
	Enable bool
	// Timeout bounds each test hook; nil means the watch's timeout.
	Timeout *metav1.Duration
	// IgnoreFailures keeps a failed test out of Ready: TestSuccess still says it.
	IgnoreFailures bool
}

// testEntry is the test field of an entry.
type testEntry struct {
	Enable         *bool            `json:"enable,omitempty"`
	Timeout        *metav1.Duration `json:"timeout,omitempty"`
	IgnoreFailures *bool            `json:"ignoreFailures,omitempty"`
}

// CRD policies of a watch entry's crds field.
const (
	CRDSkip          = "Skip"
	CRDCreate        = "Create"
	CRDCreateReplace = "CreateReplace"
)

// crdsEntry is the crds field of an entry.
type crdsEntry struct {
	Install *string `json:"install,omitempty"`
	Upgrade *string `json:"upgrade,omitempty"`
}

// Release storage settings of a watch entry.
const (
	// StorageSecrets is Helm's own driver: one Secret per revision, which
	// every helm CLI reads.
	StorageSecrets = "secrets"
	// StorageChunked is helm-operator-plugins' chunked Secrets driver: a
	// revision is split over Secrets of under 1 MiB each. No helm CLI reads it.
	StorageChunked = "chunked"
)

// Remediation settings of a watch entry.
const (
	UpgradeRemediationNone      = "none"
	UpgradeRemediationRollback  = "rollback"
	FinalizerAuto               = "auto"
	FinalizerAlways             = "always"
	InstallRemediationNone      = "none"
	InstallRemediationUninstall = "uninstall"
)

// DefaultMaxRetries is the maxRetries of a watch that sets none.
const DefaultMaxRetries = 10

// entry mirrors the file's format for the strict pass.
type entry struct {
	Group                   string                `json:"group"`
	Version                 string                `json:"version"`
	Kind                    string                `json:"kind"`
	Chart                   string                `json:"chart"`
	WatchDependentResources *bool                 `json:"watchDependentResources,omitempty"`
	OverrideValues          map[string]string     `json:"overrideValues,omitempty"`
	ReconcilePeriod         *metav1.Duration      `json:"reconcilePeriod,omitempty"`
	MaxConcurrentReconciles *int                  `json:"maxConcurrentReconciles,omitempty"`
	Selector                *metav1.LabelSelector `json:"selector,omitempty"`
	ReadinessTimeout        *metav1.Duration      `json:"readinessTimeout,omitempty"`
	UpgradeRemediation      *string               `json:"upgradeRemediation,omitempty"`
	InstallRemediation      *string               `json:"installRemediation,omitempty"`
	UninstallWait           *bool                 `json:"uninstallWait,omitempty"`
	Finalizer               *string               `json:"finalizer,omitempty"`
	MaxRetries              *int                  `json:"maxRetries,omitempty"`
	Timeout                 *metav1.Duration      `json:"timeout,omitempty"`
	ServiceAccount          *string               `json:"serviceAccount,omitempty"`
	Storage                 *string               `json:"storage,omitempty"`
	CRDs                    *crdsEntry            `json:"crds,omitempty"`
	Test                    *testEntry            `json:"test,omitempty"`
	Rollout                 *rolloutEntry         `json:"rollout,omitempty"`
	Scope                   *scopeEntry           `json:"scope,omitempty"`
	Drift                   *driftEntry           `json:"drift,omitempty"`
	RequireAddresses        *bool                 `json:"requireAddresses,omitempty"`
	HealthChecks            []healthCheckEntry    `json:"healthChecks,omitempty"`
	ValuesFrom              []ValuesFrom          `json:"valuesFrom,omitempty"`
	SensitiveValues         []string              `json:"sensitiveValues,omitempty"`
}

// Load reads and checks the watches file at path.
func Load(path string) ([]Watch, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("watches file: %w", err)
	}
	ws, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("watches file %s: %w", path, err)
	}
	return ws, nil
}

func parse(raw []byte) ([]Watch, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(js, &items); err != nil {
		return nil, fmt.Errorf("must be a list of entries: %w", err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("has no entries: nothing to watch")
	}
	entries := make([]entry, len(items))
	rules := make([]*readiness.Rules, len(items))
	seen := map[schema.GroupVersionKind]int{}
	for i, item := range items {
		e, err := checkEntry(item)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		gvk := schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}
		if j, dup := seen[gvk]; dup {
			return nil, fmt.Errorf("entry %d: %s: fields group, version, kind: duplicate GVK, already watched by entry %d", i+1, entryName(e), j)
		}
		seen[gvk] = i + 1
		entries[i] = e
		if rules[i], err = healthRules(e, raw, i); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	// Every error the loader can raise has been judged above, entry by entry;
	// one left is still given the file's context by the caller.
	loaded, err := hopwatches.LoadReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("helm-operator-plugins' loader: %w", err)
	}
	out := make([]Watch, len(loaded))
	for i := range loaded {
		e := entries[i]
		out[i] = Watch{Watch: loaded[i], ReadinessTimeout: e.ReadinessTimeout,
			UpgradeRemediation: orDefault(e.UpgradeRemediation, UpgradeRemediationNone),
			InstallRemediation: orDefault(e.InstallRemediation, InstallRemediationNone),
			UninstallWait:      e.UninstallWait != nil && *e.UninstallWait,
			Finalizer:          orDefault(e.Finalizer, FinalizerAuto),
			MaxRetries:         e.MaxRetries,
			Timeout:            e.Timeout,
			Storage:            orDefault(e.Storage, StorageSecrets),
			Rollout:            rolloutOf(e.Rollout),
			Scope:              scopeOf(e.Scope),
			Drift:              driftOf(e.Drift),
			RequireAddresses:   e.RequireAddresses != nil && *e.RequireAddresses,
			HealthChecks:       rules[i],
			ValuesFrom:         e.ValuesFrom,
			SensitiveValues:    e.SensitiveValues}
		if e.ServiceAccount != nil {
			out[i].ServiceAccount = *e.ServiceAccount
		}
		out[i].CRDInstall, out[i].CRDUpgrade = CRDCreate, CRDSkip
		if e.CRDs != nil {
			out[i].CRDInstall, out[i].CRDUpgrade = orDefault(e.CRDs.Install, CRDCreate), orDefault(e.CRDs.Upgrade, CRDSkip)
		}
		if t := e.Test; t != nil {
			out[i].Test = Test{Enable: t.Enable != nil && *t.Enable, Timeout: t.Timeout,
				IgnoreFailures: t.IgnoreFailures != nil && *t.IgnoreFailures}
		}
	}
	return out, nil
}

func checkEntry(item json.RawMessage) (entry, error) {
	e, err := decodeEntry(item)
	if err != nil {
		return e, err
	}
	return e, validate(e)
}

func entryName(e entry) string {
	return fmt.Sprintf("(%s/%s %s)", e.Group, e.Version, e.Kind)
}

func validate(e entry) error {
	name := entryName(e)
	switch {
	case e.Version == "":
		return fmt.Errorf("%s: field version is required", name)
	case e.Kind == "":
		return fmt.Errorf("%s: field kind is required", name)
	case e.Chart == "":
		return fmt.Errorf("%s: field chart is required", name)
	case e.MaxConcurrentReconciles != nil && *e.MaxConcurrentReconciles < 1:
		return fmt.Errorf("%s: field maxConcurrentReconciles must be at least 1, got %d", name, *e.MaxConcurrentReconciles)
	case e.ReconcilePeriod != nil && e.ReconcilePeriod.Duration < 0:
		return fmt.Errorf("%s: field reconcilePeriod must not be negative, got %s", name, e.ReconcilePeriod.Duration)
	case e.ReadinessTimeout != nil && e.ReadinessTimeout.Duration < 0:
		return fmt.Errorf("%s: field readinessTimeout must not be negative, got %s", name, e.ReadinessTimeout.Duration)
	case e.Timeout != nil && e.Timeout.Duration < 0:
		return fmt.Errorf("%s: field timeout must not be negative, got %s", name, e.Timeout.Duration)
	case e.MaxRetries != nil && *e.MaxRetries < 0:
		return fmt.Errorf("%s: field maxRetries must not be negative (0 means no bound), got %d", name, *e.MaxRetries)
	}
	if err := oneOf(name, "finalizer", e.Finalizer, FinalizerAuto, FinalizerAlways); err != nil {
		return err
	}
	if err := oneOf(name, "upgradeRemediation", e.UpgradeRemediation, UpgradeRemediationNone, UpgradeRemediationRollback); err != nil {
		return err
	}
	if err := oneOf(name, "installRemediation", e.InstallRemediation, InstallRemediationNone, InstallRemediationUninstall); err != nil {
		return err
	}
	if e.ServiceAccount != nil {
		if errs := validation.IsDNS1123Subdomain(*e.ServiceAccount); len(errs) > 0 {
			return fmt.Errorf("%s: field serviceAccount must name a ServiceAccount, got %q: %s", name, *e.ServiceAccount, errs[0])
		}
	}
	if err := oneOf(name, "storage", e.Storage, StorageSecrets, StorageChunked); err != nil {
		return err
	}
	if err := validateValuesFrom(name, e.ValuesFrom); err != nil {
		return err
	}
	for i, p := range e.SensitiveValues {
		if strings.Trim(p, ".") == "" || strings.Contains(p, "..") {
			return fmt.Errorf("%s: field sensitiveValues[%d] must be a dotted path of values (db.password), got %q", name, i, p)
		}
	}
	if e.CRDs != nil {
		if err := oneOf(name, "crds.install", e.CRDs.Install, CRDCreate, CRDSkip); err != nil {
			return err
		}
		if err := oneOf(name, "crds.upgrade", e.CRDs.Upgrade, CRDSkip, CRDCreate, CRDCreateReplace); err != nil {
			return err
		}
	}
	if t := e.Test; t != nil && t.Timeout != nil && t.Timeout.Duration <= 0 {
		return fmt.Errorf("%s: field test.timeout must be positive, got %s", name, t.Timeout.Duration)
	}
	if err := checkRollout(name, e.Rollout); err != nil {
		return err
	}
	if err := checkScope(name, e.Scope); err != nil {
		return err
	}
	if err := checkDrift(name, e.Drift); err != nil {
		return err
	}
	if e.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(e.Selector); err != nil {
			return fmt.Errorf("%s: field selector: %w", name, err)
		}
	}
	if st, err := os.Stat(e.Chart); err != nil {
		return fmt.Errorf("%s: field chart: %w", name, err)
	} else if !st.IsDir() && !bytes.HasSuffix([]byte(e.Chart), []byte(".tgz")) {
		return fmt.Errorf("%s: field chart: %s is neither a chart directory nor a .tgz archive", name, e.Chart)
	}
	// The loader loads the chart again; loading it here names the entry.
	if _, err := loader.Load(e.Chart); err != nil {
		return fmt.Errorf("%s: field chart: not a loadable chart: %w", name, err)
	}
	if err := checkOverrides(e.OverrideValues); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// oneOf checks that the enum field, when set, has one of the allowed values.
func oneOf(entry, field string, v *string, allowed ...string) error {
	if v == nil {
		return nil
	}
	for _, a := range allowed {
		if *v == a {
			return nil
		}
	}
	return fmt.Errorf("%s: field %s must be one of %s, got %q", entry, field, strings.Join(allowed, ", "), *v)
}

func orDefault(v *string, def string) string {
	if v == nil {
		return def
	}
	return *v
}

// Period returns the watch's reconcile period, or def when unset.
func (w Watch) Period(def time.Duration) time.Duration {
	if w.ReconcilePeriod != nil {
		return w.ReconcilePeriod.Duration
	}
	return def
}

// Concurrency returns the watch's maxConcurrentReconciles, or def when unset.
func (w Watch) Concurrency(def int) int {
	if w.MaxConcurrentReconciles != nil {
		return *w.MaxConcurrentReconciles
	}
	return def
}

// decodeEntry decodes one entry field by field, so that an error names the field.
func decodeEntry(item json.RawMessage) (entry, error) {
	var e entry
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item, &fields); err != nil {
		return e, fmt.Errorf("must be a mapping of fields: %w", err)
	}
	v := reflect.ValueOf(&e).Elem()
	known := map[string]reflect.Value{}
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		known[name] = v.Field(i)
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, ok := known[name]
		if !ok {
			return e, fmt.Errorf("unknown field %q (known fields: group, version, kind, chart, watchDependentResources, overrideValues, reconcilePeriod, maxConcurrentReconciles, selector, scope, healthChecks, readinessTimeout, requireAddresses, upgradeRemediation, installRemediation, uninstallWait, finalizer, maxRetries, timeout, serviceAccount, storage, crds, test, rollout, drift, valuesFrom, sensitiveValues)", name)
		}
		dec := json.NewDecoder(bytes.NewReader(fields[name]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(f.Addr().Interface()); err != nil {
			return e, fmt.Errorf("field %s: %w", name, err)
		}
	}
	return e, nil
}

// Readiness returns the watch's readinessTimeout, or def when unset.
func (w Watch) Readiness(def time.Duration) time.Duration {
	if w.ReadinessTimeout != nil {
		return w.ReadinessTimeout.Duration
	}
	return def
}

// Retries returns the watch's maxRetries, or DefaultMaxRetries when unset;
// 0 means no bound.
func (w Watch) Retries() int {
	if w.MaxRetries != nil {
		return *w.MaxRetries
	}
	return DefaultMaxRetries
}

// ActionTimeout returns the watch's timeout, or def when it is unset or 0.
func (w Watch) ActionTimeout(def time.Duration) time.Duration {
	if w.Timeout != nil && w.Timeout.Duration > 0 {
		return w.Timeout.Duration
	}
	return def
}
