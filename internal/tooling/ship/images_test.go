package ship_test

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/reference"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/operator-framework/operator-registry/alpha/declcfg"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
	"github.com/helmapp/helm-app-operator/internal/tooling/ship"
)

// The same commit gives the same operator image: building it again (a
// second build of the manager, a second assembly) gives the digest that was
// pushed.
func TestOperatorImageIsReproducible(t *testing.T) {
	s := images(t)
	idx, err := ship.BuildOperator(context.Background(), operatorOptions(s, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != s.operator.DigestStr() {
		t.Errorf("a second build of the same commit gives %s, the first gave %s", d, s.operator.DigestStr())
	}
}

// The operator image, pulled back as a kubelet would: an index of the
// platforms built, each image with the numeric non-root USER, the
// entrypoint, the working directory the manager reads watches.yaml from,
// the OCI labels, and the files it needs.
func TestOperatorImagePulledBack(t *testing.T) {
	s := images(t)
	ctx := context.Background()
	desc, err := img.Pull(ctx, s.operator.String())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatalf("the operator image is not an index: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
	head := strings.TrimSpace(run(t, "git", "-C", tu.RepoRoot(), "rev-parse", "HEAD"))
	for _, p := range operatorPlatforms {
		image, err := img.PullImage(ctx, s.operator.String(), p)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.Architecture != p.Architecture || cf.OS != p.OS {
			t.Errorf("%s: the config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/manager"}) || c.WorkingDir != "/opt/helm" {
			t.Errorf("%s: USER %q, ENTRYPOINT %q, WORKDIR %q; want 65532:65532, [/manager], /opt/helm", p, c.User, c.Entrypoint, c.WorkingDir)
		}
		if !slices.Contains(c.Env, "HOME=/home/nonroot") {
			t.Errorf("%s: ENV %q has no HOME", p, c.Env)
		}
		want := map[string]string{ship.LabelSource: "https://github.com/helmapp/helm-app-operator", ship.LabelRevision: head,
			ship.LabelVersion: "0.1.0", ship.LabelLicenses: "Apache-2.0"}
		for k, v := range want {
			if c.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", p, k, c.Labels[k], v)
			}
		}
		if p.Architecture == "amd64" {
			root := t.TempDir()
			if err := img.Unpack(image, root); err != nil {
				t.Fatal(err)
			}
			checkOperatorFS(t, root)
		}
	}
}

// checkOperatorFS checks the unpacked operator filesystem.
func checkOperatorFS(t *testing.T, root string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no uid 65532: %q %v", passwd, err)
	}
	for _, p := range []string{"opt/helm/watches.yaml", "opt/helm/helm-charts/nginx/Chart.yaml", "opt/helm/helm-charts/echo/Chart.yaml", "manager"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the image lacks /%s: %v", p, err)
		}
	}
	for _, d := range []string{"home/nonroot", "tmp"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		if st := ownerOf(fi); st != 65532 && fi.Mode().Perm()&0o002 == 0 {
			t.Errorf("/%s (owner %d, mode %s) is not writable by uid 65532", d, st, fi.Mode())
		}
	}
	// Static: an ELF with no program interpreter (no dynamic loader to find).
	f, err := elf.Open(filepath.Join(root, "manager"))
	if err != nil {
		t.Fatalf("the manager is not an ELF binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the manager is dynamically linked (it has a PT_INTERP program header)")
		}
	}
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("the linux/amd64 manager is for %s", f.Machine)
	}
}

// The bundle image, pulled back as OLM's unpack job would: the labels of
// metadata/annotations.yaml, manifests/ and metadata/, and a CSV whose every
// image is a digest (the operator's the pushed index, each operand's the
// stand-in's), disconnected-ready.
func TestBundleImagePulledBack(t *testing.T) {
	s := images(t)
	ctx := context.Background()
	image, err := img.PullImage(ctx, s.bundle.Digest.String(), v1.Platform{OS: "linux", Architecture: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := img.Unpack(image, root); err != nil {
		t.Fatal(err)
	}
	ann, err := bundle.ReadBundleAnnotations(root)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ann {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s=%q, metadata/annotations.yaml says %q", k, cf.Config.Labels[k], v)
		}
	}
	if cf.Config.Labels[bundle.KeyMediatype] != "registry+v1" {
		t.Errorf("labels %v", cf.Config.Labels)
	}
	csv, err := bundle.ReadBundleCSV(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := csv.Annotations["containerImage"]; got != s.operator.String() {
		t.Errorf("containerImage %s, want the pushed index %s", got, s.operator)
	}
	c := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	if c.Image != s.operator.String() {
		t.Errorf("the Deployment runs %s, want %s", c.Image, s.operator)
	}
	for env, d := range s.operands {
		if v := envValue(c, env); v != d.String() {
			t.Errorf("%s=%s, want the stand-in's digest %s", env, v, d)
		}
	}
	for _, ri := range csv.Spec.RelatedImages {
		ref, err := reference.ParseNormalizedNamed(ri.Image)
		if _, ok := ref.(reference.Digested); err != nil || !ok {
			t.Errorf("related image %s (%s) is not a digest", ri.Image, ri.Name)
		}
	}
	if got := csv.Annotations["features.operators.openshift.io/disconnected"]; got != "true" {
		t.Errorf("disconnected = %q, want true", got)
	}
}

// The catalog image, pulled back: opm serve as its entrypoint, the configs
// label, and a catalog whose olm.bundle names the pushed bundle by digest.
func TestCatalogImagePulledBack(t *testing.T) {
	s := images(t)
	ctx := context.Background()
	desc, err := img.Pull(ctx, s.catalog.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Platform.String() != "linux/amd64" {
		t.Errorf("catalog platforms: %+v", im.Manifests)
	}
	image, err := img.PullImage(ctx, s.catalog.Digest.String(), catalogPlatforms[0])
	if err != nil {
		t.Fatal(err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cmd := append(slices.Clone(c.Entrypoint), c.Cmd...); !slices.Equal(cmd, []string{"/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache"}) {
		t.Errorf("entrypoint + cmd %q", cmd)
	}
	if c.Labels[ship.LabelConfigs] != "/configs" || c.User != "65532:65532" {
		t.Errorf("labels %v, user %q", c.Labels, c.User)
	}
	root := t.TempDir()
	if err := img.Unpack(image, root); err != nil {
		t.Fatal(err)
	}
	cfg, err := declcfg.LoadFS(ctx, os.DirFS(filepath.Join(root, "configs")))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Bundles) != 1 || cfg.Bundles[0].Image != s.bundle.Digest.String() {
		t.Fatalf("the catalog's bundles %v, want one named %s", bundleImages(cfg), s.bundle.Digest)
	}
	if _, err := os.Stat(filepath.Join(root, "tmp/cache")); err != nil {
		t.Errorf("no pre-built serving cache: %v", err)
	}
}

func bundleImages(cfg *declcfg.DeclarativeConfig) []string {
	var out []string
	for _, b := range cfg.Bundles {
		out = append(out, b.Image)
	}
	return out
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}
