package ship_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
	"github.com/helmapp/helm-app-operator/internal/tooling/ship"
)

// testPlatforms keep make test fast: two of the four architectures for the
// operator, one opm for the catalog. Only the host's platform gets the real
// manager (hostPlatform); the other gets a stand-in binary (standIns), so
// that the index's shape is checked without cross-compiling the whole
// manager again (make image-push builds the real one for every platform).
var (
	operatorPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
	catalogPlatforms  = []v1.Platform{{OS: "linux", Architecture: "amd64"}}
	hostPlatform      = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
)

// shipment is the three images pushed once to a registry on loopback, with
// stand-ins for the operand images, as make image-push bundle-push
// catalog-push would push them.
type shipment struct {
	reg      *img.Registry
	operator name.Digest
	// standIns are the stand-in managers of the operator image, by platform.
	standIns map[string]string
	// operands are the stand-ins, by RELATED_IMAGE_* variable.
	operands map[string]name.Digest
	bundle   *ship.BundleResult
	catalog  *ship.CatalogResult
	dirs     []string
}

type shippedOnce struct {
	once sync.Once
	s    *shipment
	err  error
}

// shipped is pushed by the first test that needs it and removed by TestMain.
var shipped shippedOnce

func (s *shipment) tempDir() string {
	d, err := os.MkdirTemp("", "ship-test-")
	if err != nil {
		panic(err)
	}
	s.dirs = append(s.dirs, d)
	return d
}

// images pushes the images the first time a test asks for them.
func images(t *testing.T) *shipment {
	t.Helper()
	shipped.once.Do(func() { shipped.s, shipped.err = push(context.Background()) })
	if shipped.err != nil {
		t.Fatalf("shipping the images: %v", shipped.err)
	}
	return shipped.s
}

func (sh *shippedOnce) cleanup() {
	if sh.s == nil {
		return
	}
	_ = sh.s.reg.Close()
	for _, d := range sh.s.dirs {
		_ = os.RemoveAll(d)
	}
}

func push(ctx context.Context) (*shipment, error) {
	reg, err := img.ServeRegistry("127.0.0.1:0", "", "")
	if err != nil {
		return nil, err
	}
	s := &shipment{reg: reg, operands: map[string]name.Digest{}}
	root := tu.RepoRoot()
	if s.standIns, err = buildStandIns(ctx, s.tempDir()); err != nil {
		return s, err
	}
	idx, err := ship.BuildOperator(ctx, operatorOptions(s, s.tempDir()))
	if err != nil {
		return s, err
	}
	if s.operator, err = img.Push(ctx, reg.Host+"/helmapp/helm-app-operator:0.1.0", idx); err != nil {
		return s, err
	}
	related := map[string]string{}
	for env, repo := range map[string]string{"RELATED_IMAGE_NGINX": "stand-in/nginx:1.27.3", "RELATED_IMAGE_ECHO": "stand-in/echo:1.0.0"} {
		ref := reg.Host + "/" + repo
		if s.operands[env], err = pushStandIn(ctx, ref); err != nil {
			return s, err
		}
		related[env] = ref
	}
	if s.bundle, err = ship.PushBundle(ctx, bundleOptions(s, related, s.tempDir())); err != nil {
		return s, err
	}
	s.catalog, err = ship.PushCatalog(ctx, ship.CatalogOptions{Root: root, Bundles: []string{s.bundle.Digest.String()},
		Platforms: catalogPlatforms, Version: "0.1.0", SourceURL: "https://github.com/helmapp/helm-app-operator",
		Licenses: "Apache-2.0", Ref: reg.Host + "/helmapp/helm-app-operator-catalog:v0.1.0", WorkDir: s.tempDir()})
	return s, err
}

// operatorOptions are make image-push's defaults for operatorPlatforms, with
// the stand-ins.
func operatorOptions(s *shipment, binDir string) ship.OperatorOptions {
	return ship.OperatorOptions{Root: tu.RepoRoot(), Platforms: operatorPlatforms, Version: "0.1.0",
		SourceURL: "https://github.com/helmapp/helm-app-operator", Licenses: "Apache-2.0", BinDir: binDir, StandIns: s.standIns}
}

// standInSource is the stand-in manager: a static binary of a few hundred
// kilobytes that cross-compiles in seconds.
const standInSource = `package main

func main() { println("a stand-in for the manager: make image-push builds the real one") }
`

// buildStandIns cross-compiles the stand-in for every operator platform but
// the host's, into dir.
func buildStandIns(ctx context.Context, dir string) (map[string]string, error) {
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module standin\n\ngo 1.22\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(standInSource), 0o644); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, p := range operatorPlatforms {
		if p.String() == hostPlatform.String() {
			continue
		}
		out := filepath.Join(dir, "stand-in-"+p.OS+"-"+p.Architecture)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the stand-in for %s: %w\n%s", p, err, b)
		}
		bins[p.String()] = out
	}
	return bins, nil
}

// bundleOptions are make bundle-push's defaults, with the operand images
// related (RELATED_IMAGE_* overrides).
func bundleOptions(s *shipment, related map[string]string, out string) ship.BundleOptions {
	return ship.BundleOptions{
		Bundle: bundle.Options{Root: tu.RepoRoot(), Version: "0.1.0", Image: s.operator.String(), Channels: []string{"candidate"},
			OpenShiftVersions: "v4.17", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), RelatedImages: related},
		OutDir:     out,
		K8sVersion: bundle.DefaultK8sVersion,
		Ref:        s.reg.Host + "/helmapp/helm-app-operator-bundle:v0.1.0",
		Warnings:   os.Stderr,
	}
}

// pushStandIn pushes a one-file image standing in for an operand (kwok runs
// no container: only the reference matters).
func pushStandIn(ctx context.Context, ref string) (name.Digest, error) {
	im, err := img.Build(img.Spec{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Created: time.Unix(0, 0),
		Layers: []img.LayerSpec{{CreatedBy: "stand-in", Files: []img.File{{Path: "/stand-in", Mode: 0o644, Data: []byte(filepath.Base(ref))}}}}})
	if err != nil {
		return name.Digest{}, err
	}
	return img.Push(ctx, ref, im)
}
