package watches

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoadDrift(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART}
- group: g
  version: v1
  kind: B
  chart: CHART
  drift:
    mode: warn
    ignore:
    - {paths: [/spec/replicas], manager: kube-controller-manager, subresource: scale}
    - {manager: kubectl, target: {kind: Deployment, name: web}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ws[0].Drift, Drift{Mode: DriftCorrect}) {
		t.Errorf("entry 1: drift %+v, want mode correct and no rule", ws[0].Drift)
	}
	want := Drift{Mode: DriftWarn, Ignore: []DriftIgnore{
		{Paths: []string{"/spec/replicas"}, Manager: "kube-controller-manager", Subresource: "scale"},
		{Manager: "kubectl", Target: &DriftTarget{Kind: "Deployment", Name: "web"}},
	}}
	if !reflect.DeepEqual(ws[1].Drift, want) {
		t.Errorf("entry 2: drift %+v, want %+v", ws[1].Drift, want)
	}
}

func TestLoadBadDriftNamesEntryAndField(t *testing.T) {
	entry := "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: CHART, drift: %s}"
	for _, tt := range []struct{ name, drift, want string }{
		{"bad mode", "{mode: fix}", `entry 2: (g/v1 B): field drift.mode must be one of correct, warn, off, got "fix"`},
		{"a rule of nothing", "{ignore: [{subresource: scale}]}", "entry 2: (g/v1 B): field drift.ignore[0]: set paths, manager or both"},
		{"not a pointer", "{ignore: [{paths: [spec.replicas]}]}", `entry 2: (g/v1 B): field drift.ignore[0].paths[0]: "spec.replicas" is not a JSON pointer`},
		{"a bad escape", "{ignore: [{paths: [/metadata/annotations/a~2b]}]}", `field drift.ignore[0].paths[0]: "/metadata/annotations/a~2b" is not a JSON pointer: ~ must be written ~0`},
		{"an unknown field", "{ignore: [{path: [/spec/replicas]}]}", `entry 2: field drift: json: unknown field "path"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(write(t, strings.Replace(entry, "%s", tt.drift, 1)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
