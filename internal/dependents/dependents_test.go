package dependents

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestLabelerLabelsEveryObjectButNotPodTemplates(t *testing.T) {
	in := `# Source: chart/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  labels: {app: x}
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
`
	out, err := Labeler{}.Run(bytes.NewBufferString(in))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(strings.TrimPrefix(out.String(), "---\n"), "---\n")
	if len(docs) != 2 {
		t.Fatalf("want 2 objects, got %d:\n%s", len(docs), out)
	}
	for _, d := range docs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		l := m["metadata"].(map[string]any)["labels"].(map[string]any)
		if l[ManagedLabel] != ManagedLabelValue {
			t.Errorf("%s lacks the managed label: %v", m["kind"], l)
		}
		if m["kind"] == "ConfigMap" && l["app"] != "x" {
			t.Errorf("the chart's own labels were lost: %v", l)
		}
		if m["kind"] == "Deployment" {
			tpl := m["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
			if _, has := tpl[ManagedLabel]; has {
				t.Errorf("the pod template was labelled: %v", tpl)
			}
		}
	}
	if !Selector().Matches(labelsOf(map[string]string{ManagedLabel: ManagedLabelValue})) {
		t.Errorf("Selector does not match the label it stands for")
	}
}

type labelsOf map[string]string

func (l labelsOf) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelsOf) Get(k string) string            { return l[k] }
func (l labelsOf) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }
