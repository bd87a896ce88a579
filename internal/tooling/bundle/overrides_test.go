package bundle

import (
	"os"
	"path/filepath"
	"testing"
)

// TestChartImagesExpandOverrideTemplates: make bundle renders a chart as the
// operator installs it, overrideValues expanded from the environment and then
// as templates, so an override that cuts the tag out of a RELATED_IMAGE_*
// reference (what make chart writes for an image split into registry,
// repository and tag) renders the variable's image.
func TestChartImagesExpandOverrideTemplates(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: split\nversion: 0.1.0\n",
		"values.yaml": "image:\n  registry: docker.io\n  repository: team/app\n  tag: \"1\"\n",
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - name: app
        image: "{{ .Values.image.registry }}/{{ .Values.image.repository }}:{{ .Values.image.tag }}"
`,
	}
	for n, s := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	overrides := map[string]string{
		"image.registry":   `{{ regexFind "^[^/]+" "$RELATED_IMAGE_APP" }}`,
		"image.repository": `{{ regexReplaceAll "^[^/]+/" (regexReplaceAll ":[^:/]+$" "$RELATED_IMAGE_APP" "") "" }}`,
		"image.tag":        `{{ regexFind ":[^:/]+$" "$RELATED_IMAGE_APP" | trimPrefix ":" }}`,
	}
	const want = "quay.io/mirror/app:2.0"
	got, err := chartImages(dir, overrides, map[string]string{"RELATED_IMAGE_APP": want})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].image != want {
		t.Errorf("rendered images %v, want the variable's %s", got, want)
	}
}
