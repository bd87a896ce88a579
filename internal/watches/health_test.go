package watches

import (
	"strings"
	"testing"
)

func TestLoadHealthChecks(t *testing.T) {
	ws, err := Load(write(t, `
- group: web.helmapp.io
  version: v1alpha1
  kind: Nginx
  chart: CHART
  healthChecks:
  - apiVersion: cert-manager.io/v1
    kind: Certificate
    current: "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
    failed: "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"
    message: "status.conditions.filter(c, c.type == 'Ready')[0].message"
  - {apiVersion: networking.k8s.io/v1, kind: Ingress, optional: true}
- {group: web.helmapp.io, version: v1alpha1, kind: Other, chart: CHART}
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].HealthChecks == nil || ws[1].HealthChecks != nil {
		t.Errorf("health checks: %v, %v; want entry 1's only", ws[0].HealthChecks, ws[1].HealthChecks)
	}
}

func TestLoadBadHealthChecksNameEntryFieldAndLine(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"an expression that does not compile names its line and CEL's error", `
- {group: g, version: v1, kind: A, chart: CHART}
- group: g
  version: v1
  kind: B
  chart: CHART
  healthChecks:
  - apiVersion: example.com/v1
    kind: Widget
    current: "has(status.ready)"
    failed: "status.phase = 'Failed'"
`, "entry 2: (g/v1 B): field healthChecks[0].failed (line 11): 1:14: Syntax error: token recognition error at: '= '"},
		{"an expression of the wrong type", `
- group: g
  version: v1
  kind: A
  chart: CHART
  healthChecks:
  - {apiVersion: v1, kind: Service, current: "true"}
  - apiVersion: example.com/v1
    kind: Widget
    current: "true"
    message: >-
      size(status)
`, "entry 1: (g/v1 A): field healthChecks[1].message (line 11): the expression is of type int, want string"},
		{"an undeclared variable", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{apiVersion: v1, kind: Service, current: \"obj.ready\"}]}",
			"entry 1: (g/v1 A): field healthChecks[0].current (line 1): 1:1: undeclared reference to 'obj'"},
		{"no current nor failed", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{apiVersion: v1, kind: Service, inProgress: \"true\"}]}",
			"entry 1: (g/v1 A): field healthChecks[0]: set current or failed (or optional: true alone)"},
		{"missing apiVersion", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{kind: Service, current: \"true\"}]}",
			"entry 1: (g/v1 A): field healthChecks[0].apiVersion is required"},
		{"apiVersion without a version", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{apiVersion: cert-manager.io/, kind: Certificate, current: \"true\"}]}",
			`entry 1: (g/v1 A): field healthChecks[0].apiVersion must be group/version (or v1), got "cert-manager.io/"`},
		{"missing kind", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{apiVersion: v1, current: \"true\"}]}",
			"entry 1: (g/v1 A): field healthChecks[0].kind is required"},
		{"the same kind twice", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{apiVersion: v1, kind: Service, current: \"true\"}, {apiVersion: v1, kind: Service, failed: \"true\"}]}",
			"entry 1: (g/v1 A): field healthChecks[1]: v1 Service already has a health check, healthChecks[0]"},
		{"an unknown field", "- {group: g, version: v1, kind: A, chart: CHART, healthChecks: [{apiVersion: v1, kind: Service, ready: \"true\"}]}",
			`entry 1: field healthChecks: json: unknown field "ready"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, tt.content)
			_, err := Load(p)
			if err == nil {
				t.Fatalf("Load accepted a bad file")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "watches file "+p+": ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q does not name the file and %q on one line", err, tt.want)
			}
		})
	}
}
