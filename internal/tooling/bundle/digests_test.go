package bundle

import (
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
)

// The images config/ names, with their tags.
var (
	managerImage = "quay.io/helmapp/helm-app-operator:0.1.0"
	nginxImage   = "docker.io/nginxinc/nginx-unprivileged:1.27.3"
	echoImage    = "docker.io/hashicorp/http-echo:1.0.0"
)

func digestOf(c string) string { return "sha256:" + strings.Repeat(c, 64) }

// TestImageDigestsLeaveNoTag generates the bundle with a digest for every
// image and checks that no tag is left anywhere an image is named (the
// manager's container and containerImage, the RELATED_IMAGE_* variables,
// relatedImages, the charts as the operator renders them from those
// variables), and that the CSV then declares the disconnected feature.
func TestImageDigestsLeaveNoTag(t *testing.T) {
	opts := Options{Root: repoRoot, Version: "0.1.0", Image: managerImage, Channels: []string{"candidate"},
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		// The short name of the echo image is the same image.
		ImageDigests: map[string]string{managerImage: digestOf("a"), nginxImage: digestOf("b"), "hashicorp/http-echo:1.0.0": digestOf("c")}}
	files, dir, csv := generated(t, opts)
	var images []string
	images = append(images, csv.Annotations["containerImage"])
	env := map[string]string{}
	for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			images = append(images, c.Image)
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, relatedImagePrefix) {
					images = append(images, e.Value)
				}
				env[e.Name] = e.Value
			}
		}
	}
	for _, im := range csv.Spec.RelatedImages {
		images = append(images, im.Image)
	}
	ws, err := readWatches(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		rendered, err := chartImages(repoRoot+"/"+w.Chart, w.OverrideValues, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rendered {
			images = append(images, r.image)
		}
	}
	if len(images) < 1+1+2+3+2 { // containerImage, container, variables, relatedImages, charts
		t.Fatalf("found only %d image references: %v", len(images), images)
	}
	for _, im := range images {
		ref, err := reference.ParseNormalizedNamed(im)
		if err != nil {
			t.Fatalf("%q: %v", im, err)
		}
		_, tagged := ref.(reference.Tagged)
		_, digested := ref.(reference.Digested)
		if tagged || !digested {
			t.Errorf("image %s is not name@digest", im)
		}
	}
	for _, want := range []string{"quay.io/helmapp/helm-app-operator@" + digestOf("a"),
		"docker.io/nginxinc/nginx-unprivileged@" + digestOf("b"), "docker.io/hashicorp/http-echo@" + digestOf("c")} {
		if !strings.Contains(string(files[ManifestsDir+"/helm-app-operator.clusterserviceversion.yaml"]), want) {
			t.Errorf("the CSV does not name %s", want)
		}
	}
	// No file of the bundle names an image by its tag.
	for p, b := range files {
		for _, tagged := range []string{managerImage, nginxImage, echoImage} {
			if strings.Contains(string(b), tagged) {
				t.Errorf("%s still names %s", p, tagged)
			}
		}
	}
	if got := csv.Annotations[disconnectedAnnotation]; got != "true" {
		t.Errorf("%s = %q with every image pinned, want true", disconnectedAnnotation, got)
	}
	r, err := Validate(dir+"/"+BundleDir, DefaultK8sVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors)+len(r.Warnings) > 0 {
		t.Errorf("the pinned bundle does not validate: %v %v", r.Errors, r.Warnings)
	}
}

// TestImageDigestsMustCoverEveryImage: a digest map that misses an image, or
// names one the bundle does not use, is refused; with no map, the bundle
// keeps its tags and does not claim the disconnected feature.
func TestImageDigestsMustCoverEveryImage(t *testing.T) {
	base := Options{Root: repoRoot, Version: "0.1.0", Image: managerImage, Channels: []string{"candidate"}}
	missing := base
	missing.ImageDigests = map[string]string{managerImage: digestOf("a"), nginxImage: digestOf("b")}
	if _, err := Generate(missing); err == nil || !strings.Contains(err.Error(), "docker.io/hashicorp/http-echo:1.0.0 has no digest") {
		t.Errorf("a map without the echo image: err = %v", err)
	}
	extra := base
	extra.ImageDigests = map[string]string{managerImage: digestOf("a"), nginxImage: digestOf("b"), echoImage: digestOf("c"), "docker.io/library/nginx:1.27.3": digestOf("d")}
	if _, err := Generate(extra); err == nil || !strings.Contains(err.Error(), "docker.io/library/nginx:1.27.3") {
		t.Errorf("a map with an unused image: err = %v", err)
	}
	files, err := Generate(base)
	if err != nil {
		t.Fatal(err)
	}
	if csv := string(files[ManifestsDir+"/helm-app-operator.clusterserviceversion.yaml"]); !strings.Contains(csv, disconnectedAnnotation+`: "false"`) {
		t.Errorf("a bundle on tags claims the disconnected feature")
	}
}

// TestChartImagesMustBeRelatedImages: a chart image that does not come from
// a RELATED_IMAGE_* variable of the manager cannot be mirrored, and fails
// the bundle.
func TestChartImagesMustBeRelatedImages(t *testing.T) {
	_, err := relatedImages(repoRoot, nil)
	if err == nil || !strings.Contains(err.Error(), "is not the value of a RELATED_IMAGE_* variable") {
		t.Errorf("charts without the manager's variables: err = %v", err)
	}
}
