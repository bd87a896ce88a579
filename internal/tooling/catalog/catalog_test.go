package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

var repoRoot = filepath.Join("..", "..", "..")

// bundleDir generates the bundle of version v (upgrading replaces, skipping
// skipRange) from config/ into a temporary checkout and returns its bundle
// directory.
func bundleDir(t *testing.T, v, replaces, skipRange string) string {
	t.Helper()
	files, err := bundle.Generate(bundle.Options{Root: repoRoot, Version: v, Image: "quay.io/helmapp/helm-app-operator:" + v,
		Channels: []string{"candidate", "stable"}, DefaultChannel: "stable", Replaces: replaces, SkipRange: skipRange,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := files.Write(root); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, bundle.BundleDir)
}

// TestTwoVersionsMakeOneUpgradeGraph builds 0.1.0 and 0.2.0 (which replaces
// 0.1.0) into one catalog, writes it, validates it as `opm validate` does,
// and checks the graph OLM would follow: in each channel 0.2.0 is the head
// and upgrades 0.1.0.
func TestTwoVersionsMakeOneUpgradeGraph(t *testing.T) {
	ctx := context.Background()
	v1 := bundleDir(t, "0.1.0", "", "")
	v2 := bundleDir(t, "0.2.0", "helm-app-operator.v0.1.0", ">=0.0.1 <0.2.0")
	cfg, err := Render(ctx, Options{Bundles: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	path, err := Write(ctx, cfg, out)
	if err != nil {
		t.Fatal(err)
	}
	// What was written, read back with opm's loader.
	loaded, err := declcfg.LoadFS(ctx, os.DirFS(out))
	if err != nil {
		t.Fatal(err)
	}
	m, err := declcfg.ConvertToModel(*loaded)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	pkg := m["helm-app-operator"]
	if pkg == nil {
		t.Fatalf("no package helm-app-operator in %v", m)
	}
	if pkg.DefaultChannel == nil || pkg.DefaultChannel.Name != "stable" {
		t.Errorf("default channel = %v, want stable", pkg.DefaultChannel)
	}
	if pkg.Icon == nil || pkg.Icon.MediaType != "image/svg+xml" || !strings.HasPrefix(string(pkg.Icon.Data), "<svg") {
		t.Errorf("package icon = %+v, want the CSV's SVG", pkg.Icon)
	}
	for _, name := range []string{"candidate", "stable"} {
		ch := pkg.Channels[name]
		if ch == nil {
			t.Errorf("no channel %s", name)
			continue
		}
		head, err := ch.Head()
		if err != nil {
			t.Errorf("channel %s: %v", name, err)
			continue
		}
		if head.Name != "helm-app-operator.v0.2.0" || head.Replaces != "helm-app-operator.v0.1.0" || head.SkipRange != ">=0.0.1 <0.2.0" {
			t.Errorf("channel %s: head %s replaces %q skipRange %q", name, head.Name, head.Replaces, head.SkipRange)
		}
		if old := ch.Bundles["helm-app-operator.v0.1.0"]; old == nil || old.Replaces != "" {
			t.Errorf("channel %s: 0.1.0 = %+v, want the tail", name, old)
		}
		if got := head.Image; got != "quay.io/helmapp/helm-app-operator-bundle:v0.2.0" {
			t.Errorf("head's bundle image = %s", got)
		}
	}
	for _, b := range loaded.Bundles {
		if len(b.RelatedImages) == 0 || b.RelatedImages[len(b.RelatedImages)-1].Image != b.Image {
			t.Errorf("bundle %s: related images %v lack the bundle image", b.Name, b.RelatedImages)
		}
	}
}

// TestBrokenGraphsFailValidation: two versions that do not say which
// upgrades which leave each channel with two heads, which OLM cannot resolve;
// opm's validation refuses the catalog and Write writes none.
func TestBrokenGraphsFailValidation(t *testing.T) {
	ctx := context.Background()
	v1 := bundleDir(t, "0.1.0", "", "")
	v2 := bundleDir(t, "0.2.0", "", "")
	cfg, err := Render(ctx, Options{Bundles: []string{v1, v2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(cfg); err == nil || !strings.Contains(err.Error(), "multiple channel heads") {
		t.Errorf("two unconnected versions: err = %v, want multiple channel heads", err)
	}
	if _, err := Write(ctx, cfg, t.TempDir()); err == nil {
		t.Error("Write accepted a catalog that does not validate")
	}
}

// TestCIYAMLUsesReplacesMode: the OperatorHub pipeline builds the graph the
// way the bundles declare it (spec.replaces), as the test above does.
func TestCIYAMLUsesReplacesMode(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "ci.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ci struct {
		UpdateGraph string `json:"updateGraph"`
	}
	if err := yaml.UnmarshalStrict(raw, &ci); err != nil {
		t.Fatal(err)
	}
	if ci.UpdateGraph != "replaces-mode" {
		t.Errorf("ci.yaml updateGraph = %q, want replaces-mode (the bundles set spec.replaces)", ci.UpdateGraph)
	}
}
