package watches

import (
	"os"
	"path/filepath"
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
  timeout: 90s
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
}

func TestLoadBadFilesNameEntryAndField(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"unknown field", "- {group: g, version: v1, kind: A, chart: CHART, chartz: x}", `entry 1: unknown field "chartz"`},
		{"unknown field lists the known ones", "- {group: g, version: v1, kind: A, chart: CHART, timeoutt: 1m}", "readinessTimeout, timeout)"},
		{"wrong type", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: CHART, maxConcurrentReconciles: two}", "entry 2: field maxConcurrentReconciles: json: cannot unmarshal string"},
		{"missing kind", "- {group: g, version: v1, chart: CHART}", "entry 1: (g/v1 ): field kind is required"},
		{"missing chart dir", "- {group: g, version: v1, kind: A, chart: /nonexistent/chart}", "entry 1: (g/v1 A): field chart: stat /nonexistent/chart"},
		{"zero concurrency", "- {group: g, version: v1, kind: A, chart: CHART, maxConcurrentReconciles: 0}", "field maxConcurrentReconciles must be at least 1"},
		{"bad duration", "- {group: g, version: v1, kind: A, chart: CHART, reconcilePeriod: often}", "entry 1: field reconcilePeriod: time: invalid duration"},
		{"negative timeout", "- {group: g, version: v1, kind: A, chart: CHART, timeout: -1m}", "entry 1: (g/v1 A): field timeout must not be negative, got -1m0s"},
		{"bad timeout", "- {group: g, version: v1, kind: A, chart: CHART, timeout: soon}", "entry 1: field timeout: time: invalid duration"},
		{"bad selector", "- {group: g, version: v1, kind: A, chart: CHART, selector: {matchExpressions: [{key: a, operator: Sometimes}]}}", "field selector"},
		{"duplicate kind", "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: A, chart: CHART}", "duplicate GVK"},
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
