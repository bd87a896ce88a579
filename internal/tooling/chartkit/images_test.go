package chartkit

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/tooling/charts"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// imagesChart runs one container per shape of image value real charts use,
// and two the command cannot map: one whose template builds the reference
// from more than the value, and one not rendered with the defaults.
func imagesChart(t *testing.T) string {
	t.Helper()
	pod := func(name, image string) string {
		return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec:
      containers:
      - name: main
        image: ` + image + "\n"
	}
	return writeChart(t, filepath.Join(t.TempDir(), "shapes"),
		"apiVersion: v2\nname: shapes\nversion: 0.1.0\nappVersion: \"2.0.0\"\n",
		`own:
  repository: docker.io/library/own
  tag: ""
  reference: ""
split:
  registry: quay.io
  repository: team/split
  tag: "1.0"
pair:
  repository: ghcr.io/team/pair
  release: v3
sidecarImage: registry.k8s.io/sidecar:v0.1
built:
  repository: team/built
  tag: "4"
later:
  enabled: false
  image:
    repository: team/later
    tag: "5"
`, map[string]string{
			"own.yaml":     pod("own", `"{{ .Values.own.reference | default (printf "%s:%s" .Values.own.repository (.Values.own.tag | default .Chart.AppVersion)) }}"`),
			"split.yaml":   pod("split", `"{{ .Values.split.registry }}/{{ .Values.split.repository }}:{{ .Values.split.tag }}"`),
			"pair.yaml":    pod("pair", `"{{ .Values.pair.repository }}:{{ .Values.pair.release }}"`),
			"sidecar.yaml": pod("sidecar", `"{{ .Values.sidecarImage }}"`),
			"built.yaml":   pod("built", `"docker.io/{{ .Values.built.repository }}-v{{ .Values.built.tag }}:latest"`),
			"later.yaml":   "{{- if .Values.later.enabled }}\n" + pod("later", `"{{ .Values.later.image.repository }}:{{ .Values.later.image.tag }}"`) + "{{- end }}\n",
		})
}

// TestImagesMapToRelatedImages: every image of the defaults whose value
// holds the whole reference, or splits it into registry/repository/tag, gets
// a RELATED_IMAGE variable with the default image, and the overrides the
// command writes make each container run exactly the variable's image, by
// tag and by digest, once expanded as the operator expands them; what it
// cannot map is named.
func TestImagesMapToRelatedImages(t *testing.T) {
	ch, err := loader.Load(imagesChart(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapImages(ch, "Shapes")
	if err != nil {
		t.Fatal(err)
	}
	want := []relatedImage{
		{"RELATED_IMAGE_SHAPES", "docker.io/library/own:2.0.0"},
		{"RELATED_IMAGE_SHAPES_2", "ghcr.io/team/pair:v3"},
		{"RELATED_IMAGE_SHAPES_3", "registry.k8s.io/sidecar:v0.1"},
		{"RELATED_IMAGE_SHAPES_4", "quay.io/team/split:1.0"},
	}
	if !slices.Equal(m.Images, want) {
		t.Errorf("images = %v, want %v", m.Images, want)
	}
	unmapped := strings.Join(m.Unmapped, "\n")
	for _, s := range []string{"value built:", "value later.image:", "Deployment built, container main runs docker.io/team/built-v4:latest"} {
		if !strings.Contains(unmapped, s) {
			t.Errorf("unmapped lacks %q:\n%s", s, unmapped)
		}
	}

	defaults := map[string]string{"own": "docker.io/library/own:2.0.0", "pair": "ghcr.io/team/pair:v3",
		"sidecar": "registry.k8s.io/sidecar:v0.1", "split": "quay.io/team/split:1.0"}
	for _, form := range []string{"tag", "digest", "unset"} {
		env := map[string]string{}
		for i, im := range want {
			if form == "unset" {
				// The chart's defaults apply, as without the overrides.
				env[im.Env] = ""
				continue
			}
			env[im.Env] = "mirror.example/m" + string(rune('a'+i)) + "/img:t" + string(rune('a'+i))
			if form == "digest" {
				env[im.Env] = "mirror.example/m" + string(rune('a'+i)) + "/img@sha256:" + strings.Repeat(string(rune('a'+i)), 64)
			}
		}
		vals := map[string]any{}
		for _, o := range m.Overrides {
			v, err := watches.ExpandOverride(o.Key, o.Value, func(n string) string { return env[n] })
			if err != nil {
				t.Fatal(err)
			}
			if err := strvals.ParseInto(o.Key+"="+v, vals); err != nil {
				t.Fatal(err)
			}
		}
		r, err := charts.RenderChart(ch, "r", "default", vals)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, doc := range r.Manifests {
			var cs []container
			var obj map[string]any
			if err := sigsyaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			collectContainers(obj["metadata"].(map[string]any)["name"].(string), obj, &cs)
			for _, c := range cs {
				got[strings.TrimSuffix(strings.Fields(c.where)[0], ",")] = c.image
			}
		}
		for deploy, envName := range map[string]string{"own": "RELATED_IMAGE_SHAPES", "pair": "RELATED_IMAGE_SHAPES_2", "sidecar": "RELATED_IMAGE_SHAPES_3", "split": "RELATED_IMAGE_SHAPES_4"} {
			want := env[envName]
			if form == "unset" {
				want = defaults[deploy]
			}
			if got[deploy] != want {
				t.Errorf("%s: Deployment %s runs %q, want %s's %q", form, deploy, got[deploy], envName, want)
			}
		}
	}
}
