package watches

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func chartDir(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../helm-charts/nginx")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "watches.yaml")
	if strings.Contains(content, "BADCHART") {
		// A directory that is there but holds no loadable chart.
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, "Chart.yaml"), []byte("name: [unclosed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		content = strings.ReplaceAll(content, "BADCHART", bad)
	}
	content = strings.ReplaceAll(content, "CHART", chartDir(t))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadGoodFile(t *testing.T) {
	t.Setenv("HELMAPP_TEST_TAG", "9.9.9")
	ws, err := Load(write(t, `
- group: web.helmapp.io
  version: v1alpha1
  kind: Nginx
  chart: CHART
  reconcilePeriod: 2m
  maxConcurrentReconciles: 3
  overrideValues:
    image.tag: $HELMAPP_TEST_TAG
  selector:
    matchLabels: {tier: web}
  maxRetries: 3
  timeout: 90s
- {group: web.helmapp.io, version: v1alpha1, kind: Other, chart: CHART}
- {group: web.helmapp.io, version: v1alpha1, kind: Unbounded, chart: CHART, maxRetries: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	if w.Kind != "Nginx" || w.Chart == nil || w.Chart.Name() != "nginx" {
		t.Errorf("loaded %+v", w)
	}
	if w.Period(time.Minute) != 2*time.Minute || w.Concurrency(1) != 3 {
		t.Errorf("period %s concurrency %d", w.Period(time.Minute), w.Concurrency(1))
	}
	if w.OverrideValues["image.tag"] != "9.9.9" {
		t.Errorf("override values not expanded from the environment: %v", w.OverrideValues)
	}
	if w.ActionTimeout(5*time.Minute) != 90*time.Second {
		t.Errorf("timeout %s, want 90s", w.ActionTimeout(5*time.Minute))
	}
	if !*w.WatchDependentResources {
		t.Errorf("watchDependentResources should default to true")
	}
	if w.UpgradeRemediation != UpgradeRemediationNone || w.InstallRemediation != InstallRemediationNone || w.UninstallWait {
		t.Errorf("remediation defaults: upgrade %q install %q uninstallWait %v", w.UpgradeRemediation, w.InstallRemediation, w.UninstallWait)
	}
	if w.Retries() != 3 || ws[1].Retries() != DefaultMaxRetries || ws[2].Retries() != 0 {
		t.Errorf("maxRetries %d, %d (default), %d (unbounded)", w.Retries(), ws[1].Retries(), ws[2].Retries())
	}
}

func TestLoadServiceAccount(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART, serviceAccount: deployer}
- {group: g, version: v1, kind: B, chart: CHART}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].ServiceAccount != "deployer" || ws[1].ServiceAccount != "" {
		t.Errorf("serviceAccount %q, %q; want deployer and none", ws[0].ServiceAccount, ws[1].ServiceAccount)
	}
}

func TestLoadValuesFrom(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART, valuesFrom: [{kind: ConfigMap, name: team-defaults}, {kind: Secret, name: tls, valuesKey: key.pem, targetPath: tls.key, optional: true}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []ValuesFrom{{Kind: "ConfigMap", Name: "team-defaults"}, {Kind: "Secret", Name: "tls", ValuesKey: "key.pem", TargetPath: "tls.key", Optional: true}}
	if !reflect.DeepEqual(ws[0].ValuesFrom, want) {
		t.Errorf("valuesFrom = %+v, want %+v", ws[0].ValuesFrom, want)
	}
}

func TestLoadSensitiveValues(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART, sensitiveValues: [db.password, "tokens.*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"db.password", "tokens.*"}; !reflect.DeepEqual(ws[0].SensitiveValues, want) {
		t.Errorf("sensitiveValues = %v, want %v", ws[0].SensitiveValues, want)
	}
}

func TestLoadRemediationAndUninstallWait(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART, upgradeRemediation: rollback, installRemediation: uninstall, uninstallWait: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if w := ws[0]; w.UpgradeRemediation != UpgradeRemediationRollback || w.InstallRemediation != InstallRemediationUninstall || !w.UninstallWait {
		t.Errorf("loaded upgrade %q install %q uninstallWait %v", w.UpgradeRemediation, w.InstallRemediation, w.UninstallWait)
	}
}

// finalizer defaults to auto; always is taken as given.
func TestLoadFinalizer(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART, finalizer: always}
- {group: g, version: v1, kind: B, chart: CHART}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].Finalizer != FinalizerAlways || ws[1].Finalizer != FinalizerAuto {
		t.Errorf("finalizer %q, %q; want always and auto (the default)", ws[0].Finalizer, ws[1].Finalizer)
	}
}

// storage defaults to Helm's Secrets; chunked is taken as given.
func TestLoadStorage(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART}
- {group: g, version: v1, kind: B, chart: CHART, storage: chunked}
- {group: g, version: v1, kind: C, chart: CHART, storage: secrets}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].Storage != StorageSecrets || ws[1].Storage != StorageChunked || ws[2].Storage != StorageSecrets {
		t.Errorf("storage %q %q %q, want secrets chunked secrets", ws[0].Storage, ws[1].Storage, ws[2].Storage)
	}
}

// crds defaults to what Helm does (Create on install, Skip on upgrade).
func TestLoadCRDPolicy(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART}
- {group: g, version: v1, kind: B, chart: CHART, crds: {upgrade: CreateReplace}}
- {group: g, version: v1, kind: C, chart: CHART, crds: {install: Skip, upgrade: Create}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]string{{CRDCreate, CRDSkip}, {CRDCreate, CRDCreateReplace}, {CRDSkip, CRDCreate}} {
		if got := [2]string{ws[i].CRDInstall, ws[i].CRDUpgrade}; got != want {
			t.Errorf("entry %d: crds %v, want %v", i+1, got, want)
		}
	}
}

// test is off unless enabled; its timeout falls back to the watch's.
func TestLoadTest(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART}
- {group: g, version: v1, kind: B, chart: CHART, test: {enable: true, timeout: 30s, ignoreFailures: true}}
- {group: g, version: v1, kind: C, chart: CHART, test: {enable: true}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].Test.Enable || ws[0].Test.Timeout != nil || ws[0].Test.IgnoreFailures {
		t.Errorf("entry 1: test %+v, want off", ws[0].Test)
	}
	if !ws[1].Test.Enable || ws[1].Test.Timeout == nil || ws[1].Test.Timeout.Duration != 30*time.Second || !ws[1].Test.IgnoreFailures {
		t.Errorf("entry 2: test %+v, want enabled, 30s, ignoring failures", ws[1].Test)
	}
	if !ws[2].Test.Enable || ws[2].Test.Timeout != nil || ws[2].Test.IgnoreFailures {
		t.Errorf("entry 3: test %+v, want enabled with the watch's timeout", ws[2].Test)
	}
}

func TestLoadBadFilesNameEntryAndField(t *testing.T) {
	// An environment value with a comma cannot be set as one Helm value.
	t.Setenv("HELMAPP_TEST_LIST", "a,b")
	tests := []struct{ name, content, want string }{
		{"chart that does not load", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: BADCHART}", "entry 2: (g/v1 B): field chart: not a loadable chart: "},
		{"overrideValues template that does not parse", "- {group: g, version: v1, kind: A, chart: CHART, overrideValues: {image.tag: '{{ nope }}'}}", `entry 1: (g/v1 A): field overrideValues: key "image.tag": not a valid template: template: image.tag:1: function "nope" not defined`},
		{"overrideValues template that fails", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: CHART, overrideValues: {replicaCount: '{{ fail \"no replicas\" }}'}}", `entry 2: (g/v1 B): field overrideValues: key "replicaCount": its template fails: `},
		{"overrideValues template failure keeps its cause", "- {group: g, version: v1, kind: A, chart: CHART, overrideValues: {replicaCount: '{{ fail \"no replicas\" }}'}}", "no replicas"},
		{"overrideValues key Helm cannot set", "- {group: g, version: v1, kind: A, chart: CHART, overrideValues: {'image[x]': v}}", `entry 1: (g/v1 A): field overrideValues: key "image[x]": cannot be set as a Helm value (key=value, as --set does): error parsing index`},
		{"overrideValues value Helm cannot set", "- {group: g, version: v1, kind: A, chart: CHART, overrideValues: {image.tag: $HELMAPP_TEST_LIST}}", `entry 1: (g/v1 A): field overrideValues: key "image.tag": cannot be set as a Helm value (key=value, as --set does): key "b" has no value`},
		{"duplicate kind names both entries", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: A, chart: CHART}", "entry 2: (g/v1 A): fields group, version, kind: duplicate GVK, already watched by entry 1"},
		{"unknown field", "- {group: g, version: v1, kind: A, chart: CHART, chartz: x}", `entry 1: unknown field "chartz"`},
		{"unknown field lists the known ones", "- {group: g, version: v1, kind: A, chart: CHART, timeoutt: 1m}", "maxRetries, timeout, serviceAccount, storage, crds, test, rollout, drift, valuesFrom, sensitiveValues)"},
		{"wrong type", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: CHART, maxConcurrentReconciles: two}", "entry 2: field maxConcurrentReconciles: json: cannot unmarshal string"},
		{"missing kind", "- {group: g, version: v1, chart: CHART}", "entry 1: (g/v1 ): field kind is required"},
		{"missing chart dir", "- {group: g, version: v1, kind: A, chart: /nonexistent/chart}", "entry 1: (g/v1 A): field chart: stat /nonexistent/chart"},
		{"zero concurrency", "- {group: g, version: v1, kind: A, chart: CHART, maxConcurrentReconciles: 0}", "field maxConcurrentReconciles must be at least 1"},
		{"bad duration", "- {group: g, version: v1, kind: A, chart: CHART, reconcilePeriod: often}", "entry 1: field reconcilePeriod: time: invalid duration"},
		{"negative maxRetries", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: CHART, maxRetries: -1}", "entry 2: (g/v1 B): field maxRetries must not be negative (0 means no bound), got -1"},
		{"maxRetries not a number", "- {group: g, version: v1, kind: A, chart: CHART, maxRetries: often}", "entry 1: field maxRetries: json: cannot unmarshal string"},
		{"unknown field lists maxRetries", "- {group: g, version: v1, kind: A, chart: CHART, retries: 3}", "uninstallWait, finalizer, maxRetries, timeout, serviceAccount, storage, crds, test, rollout, drift, valuesFrom, sensitiveValues)"},
		{"bad finalizer", "- {group: g, version: v1, kind: A, chart: CHART, finalizer: never}", `entry 1: (g/v1 A): field finalizer must be one of auto, always, got "never"`},
		{"negative timeout", "- {group: g, version: v1, kind: A, chart: CHART, timeout: -1m}", "entry 1: (g/v1 A): field timeout must not be negative, got -1m0s"},
		{"bad timeout", "- {group: g, version: v1, kind: A, chart: CHART, timeout: soon}", "entry 1: field timeout: time: invalid duration"},
		{"bad selector", "- {group: g, version: v1, kind: A, chart: CHART, selector: {matchExpressions: [{key: a, operator: Sometimes}]}}", "field selector"},
		{"duplicate kind", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: A, chart: CHART}", "duplicate GVK"},
		{"bad upgradeRemediation", "- {group: g, version: v1, kind: A, chart: CHART, upgradeRemediation: uninstall}", `entry 1: (g/v1 A): field upgradeRemediation must be one of none, rollback, got "uninstall"`},
		{"bad crds.upgrade", "- {group: g, version: v1, kind: A, chart: CHART, crds: {upgrade: Replace}}", `entry 1: (g/v1 A): field crds.upgrade must be one of Skip, Create, CreateReplace, got "Replace"`},
		{"bad crds.install", "- {group: g, version: v1, kind: A, chart: CHART, crds: {install: CreateReplace}}", `entry 1: (g/v1 A): field crds.install must be one of Create, Skip, got "CreateReplace"`},
		{"bad test.timeout", "- {group: g, version: v1, kind: A, chart: CHART, test: {enable: true, timeout: 0s}}", `entry 1: (g/v1 A): field test.timeout must be positive, got 0s`},
		{"unknown test field", "- {group: g, version: v1, kind: A, chart: CHART, test: {enabled: true}}", `entry 1: field test: json: unknown field "enabled"`},
		{"unknown crds field", "- {group: g, version: v1, kind: A, chart: CHART, crds: {delete: true}}", `entry 1: field crds: json: unknown field "delete"`},
		{"bad storage", "- {group: g, version: v1, kind: A, chart: CHART, storage: configmaps}", `entry 1: (g/v1 A): field storage must be one of secrets, chunked, got "configmaps"`},
		{"bad installRemediation", "- {group: g, version: v1, kind: A, chart: CHART, installRemediation: rollback}", `entry 1: (g/v1 A): field installRemediation must be one of none, uninstall, got "rollback"`},
		{"uninstallWait not a bool", "- {group: g, version: v1, kind: A, chart: CHART, uninstallWait: sometimes}", "entry 1: field uninstallWait: json: cannot unmarshal string"},
		{"serviceAccount not a name", "- {group: g, version: v1, kind: A, chart: CHART, serviceAccount: Team_Deployer}", `entry 1: (g/v1 A): field serviceAccount must name a ServiceAccount, got "Team_Deployer": a lowercase RFC 1123 subdomain`},
		{"valuesFrom of another kind", "- {group: g, version: v1, kind: A, chart: CHART, valuesFrom: [{kind: Pod, name: p}]}", `entry 1: (g/v1 A): field valuesFrom[0].kind must be Secret or ConfigMap, got "Pod"`},
		{"valuesFrom without a name", "- {group: g, version: v1, kind: A, chart: CHART, valuesFrom: [{kind: Secret}]}", `entry 1: (g/v1 A): field valuesFrom[0].name must name a Secret, got ""`},
		{"sensitiveValues empty path", "- {group: g, version: v1, kind: A, chart: CHART, sensitiveValues: [db.password, ..]}", `entry 1: (g/v1 A): field sensitiveValues[1] must be a dotted path of values (db.password), got ".."`},
		{"valuesFrom unknown field", "- {group: g, version: v1, kind: A, chart: CHART, valuesFrom: [{kind: Secret, name: s, key: k}]}", `entry 1: field valuesFrom: json: unknown field "key"`},
		{"serviceAccount not a string", "- {group: g, version: v1, kind: A, chart: CHART, serviceAccount: [a]}", "entry 1: field serviceAccount: json: cannot unmarshal array"},
		{"zero rollout.maxUnavailable", "- {group: g, version: v1, kind: A, chart: CHART, rollout: {maxUnavailable: 0}}", `entry 1: (g/v1 A): field rollout.maxUnavailable must be at least 1 or a percentage, got 0`},
		{"rollout.maxUnavailable over 100%", "- {group: g, version: v1, kind: A, chart: CHART, rollout: {maxUnavailable: 150%}}", `entry 1: (g/v1 A): field rollout.maxUnavailable must be a percentage from 1% to 100%, got "150%"`},
		{"rollout.maxUnavailable not a number", "- {group: g, version: v1, kind: A, chart: CHART, rollout: {maxUnavailable: some}}", `entry 1: (g/v1 A): field rollout.maxUnavailable must be a whole number or a percentage such as 25%, got "some"`},
		{"negative rollout.maxFailures", "- {group: g, version: v1, kind: A, chart: CHART, rollout: {maxFailures: -1}}", `entry 1: (g/v1 A): field rollout.maxFailures must not be negative (0 means no bound), got -1`},
		{"unknown rollout field", "- {group: g, version: v1, kind: A, chart: CHART, rollout: {partitions: 2}}", `entry 1: field rollout: json: unknown field "partitions"`},
		{"empty", "[]", "has no entries"},
		{"not a list", "group: g", "must be a list of entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, tt.content)
			_, err := Load(p)
			if err == nil {
				t.Fatalf("Load accepted a bad file")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file and %q", err, tt.want)
			}
		})
	}
}

// requireAddresses (issue 40) defaults to false: an address-less
// LoadBalancer Service or Ingress is then only a warning.
func TestLoadRequireAddresses(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART, requireAddresses: true}
- {group: g, version: v1, kind: B, chart: CHART}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !ws[0].RequireAddresses || ws[1].RequireAddresses {
		t.Errorf("requireAddresses %v, %v; want true and the default false", ws[0].RequireAddresses, ws[1].RequireAddresses)
	}
	if _, err := Load(write(t, "- {group: g, version: v1, kind: A, chart: CHART, requireAddresses: sometimes}")); err == nil ||
		!strings.Contains(err.Error(), "entry 1: field requireAddresses: json: cannot unmarshal string") {
		t.Errorf("requireAddresses not a bool: %v", err)
	}
}
