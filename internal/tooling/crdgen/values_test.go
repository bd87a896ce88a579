package crdgen

import (
	"strings"
	"testing"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// TestValuesYAMLSchema types one value, v, from a values.yaml and compares
// the result as YAML, the form a reader of the CRD sees.
func TestValuesYAMLSchema(t *testing.T) {
	tests := []struct {
		name   string
		values string // values.yaml holding v
		want   string // YAML of the schema of v
	}{
		{"string", "v: nginx", "type: string\n"},
		{"quoted number is a string", `v: "1.25"`, "type: string\n"},
		{"boolean", "v: false", "type: boolean\n"},
		{"float", "v: 0.5", "type: number\n"},
		{"integer is a number", "v: 1", "type: number\n"},
		{"replica count is an integer", "replicaCount: 1", ""},
		{"null accepts anything", "v: null", "description: '(Any type: the chart''s values.yaml leaves it empty.)'\nx-kubernetes-preserve-unknown-fields: true\n"},
		{"empty string accepts anything", `v: ""`, "description: '(Any type: the chart''s values.yaml leaves it empty.)'\nx-kubernetes-preserve-unknown-fields: true\n"},
		{"empty map is free-form", "v: {}", "type: object\nx-kubernetes-preserve-unknown-fields: true\n"},
		{"empty list holds anything", "v: []", "items:\n  x-kubernetes-preserve-unknown-fields: true\ntype: array\n"},
		{"map lists its keys and keeps others", "v:\n  a: x\n  b: 2\n",
			"properties:\n  a:\n    type: string\n  b:\n    type: number\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n"},
		{"list of strings", "v: [a, b]", "items:\n  type: string\ntype: array\n"},
		{"list of numbers", "v: [1, 2.5]", "items:\n  type: number\ntype: array\n"},
		{"list of mixed types holds anything", "v: [a, 1]", "items:\n  x-kubernetes-preserve-unknown-fields: true\ntype: array\n"},
		{"list of objects has the keys of all", "v:\n- name: a\n  value: b\n- name: c\n  port: 80\n",
			"items:\n  properties:\n    name:\n      type: string\n    port:\n      type: integer\n    value:\n      type: string\n  type: object\n  x-kubernetes-preserve-unknown-fields: true\ntype: array\n"},
		{"helm-docs comment", "# Section header\n\n# -- (int) Number of pods.\n# Ignored with autoscaling.\n# @default -- 1\nv: 1",
			"description: Number of pods. Ignored with autoscaling.\ntype: number\n"},
		{"plain comment: its last paragraph, without YAML or links", "## Pod settings\n##\n## Resources of the pod.\n## ref: https://kubernetes.io/docs\n## e.g:\n## limits:\n##   cpu: 100m\nv: {}",
			"description: Resources of the pod.\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n"},
		{"Bitnami @param above the parent", "## Image\n## @param v.tag [string] Image tag (immutable tags are recommended)\n##\nv:\n  tag: x\n",
			"description: Image\nproperties:\n  tag:\n    description: Image tag (immutable tags are recommended)\n    type: string\ntype: object\nx-kubernetes-preserve-unknown-fields: true\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := ValuesYAMLSchema([]byte(tt.values))
			if err != nil {
				t.Fatal(err)
			}
			if got.Default != nil || got.Properties["v"].Default != nil {
				t.Errorf("a default was copied into the CRD")
			}
			if tt.want == "" {
				return
			}
			out, err := yaml.Marshal(got.Properties["v"])
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tt.want)
			}
		})
	}
}

// TestNumberTypes checks the integer-or-number rule: a number is a number,
// except for the keys named like the Kubernetes API's integer and
// int-or-string fields.
func TestNumberTypes(t *testing.T) {
	for key, want := range map[string]string{
		"replicas": "integer", "replicaCount": "integer", "port": "integer", "metricsPort": "integer",
		"timeoutSeconds": "integer", "failureThreshold": "integer", "revisionHistoryLimit": "integer",
		"runAsUser": "integer", "fsGroup": "integer", "weight": "integer",
		"maxUnavailable": "int-or-string", "minAvailable": "int-or-string", "maxSurge": "int-or-string",
		"ratio": "number", "tlsMinVersion": "number", "auditInterval": "number", "logVerbosity": "number", "httpTimeout": "number",
		"cpuLimit": "number", "cpuThreshold": "number", "minReplicas": "integer", "backoffLimit": "integer",
	} {
		if got := typeName(numberType(key)); got != want {
			t.Errorf("%s: %s, want %s", key, got, want)
		}
	}
}

// TestValuesTypedSpecAdmission applies what a user may set to a CRD typed
// from values.yaml: the chart's own defaults, a fraction where values.yaml
// wrote 1, keys values.yaml lacks, and anything where it shows no type, are
// accepted; a value of another type than values.yaml's is refused.
func TestValuesTypedSpecAdmission(t *testing.T) {
	values := `# -- Pods.
replicaCount: 1
scale: 1
image:
  repository: nginx
  tag: ""
maxUnavailable: 1
extraEnv: []
podAnnotations: {}
url: null
enabled: true
`
	w := watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "thing", Version: "1.0.0"},
			Raw:    []*chart.File{{Name: "values.yaml", Data: []byte(values)}},
			Values: fromYAML(t, values)},
	}
	crd, err := CRD(w)
	if err != nil {
		t.Fatal(err)
	}
	if errs := validateCRD(t, crd); len(errs) > 0 {
		t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
	}
	notes, _ := SpecNotes(w.Chart)
	if len(notes) != 1 || !strings.Contains(notes[0], "no type for 2 value(s)") || !strings.Contains(notes[0], "image.tag, url") {
		t.Errorf("notes = %q", notes)
	}
	for _, tt := range []struct{ name, spec, wantErr string }{
		{"the chart's defaults", values, ""},
		{"nothing", "{}", ""},
		{"a fraction where values.yaml wrote 1", "scale: 1.5", ""},
		{"a percentage for an int-or-string field", "maxUnavailable: 25%", ""},
		{"keys values.yaml lacks", "image: {digest: sha256:abc}\nnewKey: {a: 1}", ""},
		{"anything where values.yaml shows no type", "url: {host: x}\nimage: {tag: 5}", ""},
		{"list items of any kind", "extraEnv: [{name: A, value: b}, x]", ""},
		{"a string for a boolean", "enabled: 'yes'", "spec.enabled"},
		{"a fraction of pods", "replicaCount: 1.5", "spec.replicaCount"},
		{"a map for a string", "image: {repository: {a: b}}", "spec.image.repository"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
				"metadata": map[string]any{"name": "x", "namespace": "default"}, "spec": fromYAML(t, tt.spec)}
			unknown, errs := admit(t, crd, obj)
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Fatalf("rejected: %v", errs.ToAggregate())
			case tt.wantErr != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.wantErr)):
				t.Fatalf("errors = %v, want one about %s", errs.ToAggregate(), tt.wantErr)
			}
			if tt.wantErr == "" && len(unknown) > 0 {
				t.Errorf("pruned %v", unknown)
			}
		})
	}
}
