package bundle

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCommittedBundleIsUpToDate regenerates the bundle from config/ with the
// version, image and channels the committed bundle records and fails if
// bundle/ or bundle.Dockerfile differ in anything but createdAt.
func TestCommittedBundleIsUpToDate(t *testing.T) {
	opts, err := OptionsFromBundle(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := files.Diff(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Errorf("bundle/ is stale; run `make bundle VERSION=%s IMG=%s CHANNELS=%s` and commit the result:\n  %s",
			opts.Version, opts.Image, strings.Join(opts.Channels, ","), strings.Join(diffs, "\n  "))
	}
}

// TestGenerateTwiceChangesOnlyCreatedAt generates the bundle twice, at
// different times, into temporary directories.
func TestGenerateTwiceChangesOnlyCreatedAt(t *testing.T) {
	opts := Options{Root: repoRoot, Version: "9.8.7", Image: "example.com/op/helm-app-operator@sha256:" + strings.Repeat("ab", 32),
		Channels: []string{"stable", "fast"}, DefaultChannel: "stable", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	first, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := first.Write(dir); err != nil {
		t.Fatal(err)
	}
	opts.CreatedAt = opts.CreatedAt.Add(time.Hour)
	second, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := second.Diff(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) > 0 {
		t.Errorf("generating twice changed more than createdAt:\n  %s", strings.Join(diffs, "\n  "))
	}
	csv := string(second[ManifestsDir+"/helm-app-operator.clusterserviceversion.yaml"])
	for _, want := range []string{"name: helm-app-operator.v9.8.7", "version: 9.8.7", `createdAt: "2026-01-02T04:04:05Z"`,
		"image: " + opts.Image, "containerImage: " + opts.Image} {
		if !strings.Contains(csv, want) {
			t.Errorf("the CSV lacks %q", want)
		}
	}
	if ann := string(second[AnnotationsYAML]); !strings.Contains(ann, KeyChannels+": stable,fast") {
		t.Errorf("annotations.yaml lacks the channels:\n%s", ann)
	}
	// The written bundle validates too (another version, image and channels).
	r, err := Validate(dir+"/"+BundleDir, DefaultK8sVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors)+len(r.Warnings) > 0 {
		t.Errorf("%s", fmt.Sprint(r.Errors, r.Warnings))
	}
}
