package ship

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	"github.com/helmapp/helm-app-operator/internal/tooling/catalog"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// The catalog image's layout, as `opm generate dockerfile` lays it out.
const (
	OPMPath = "/bin/opm"
	// ConfigsDir holds the file-based catalog.
	ConfigsDir = "/configs"
	// CacheDir holds opm serve's pre-built cache of ConfigsDir.
	CacheDir = "/tmp/cache"
	// LabelConfigs tells OLM and opm where the catalog is.
	LabelConfigs = "operators.operatorframework.io.index.configs.v1"
)

// CatalogOptions say which catalog image to make.
type CatalogOptions struct {
	// Root is the checkout (tools/opm pins opm).
	Root string
	// Bundles are the bundle images, by digest, in version order.
	Bundles []string
	// Platforms to build, one opm each.
	Platforms []v1.Platform
	// Version, SourceURL and Licenses become OCI labels.
	Version, SourceURL, Licenses string
	// Ref is where the catalog image is pushed (CATALOG_IMG).
	Ref string
	// WorkDir receives the rendered catalog (WorkDir/configs) and its cache.
	WorkDir string
	// Go is the go command; "go" when empty.
	Go string
}

// CatalogResult is what PushCatalog made.
type CatalogResult struct {
	Digest     name.Digest
	ConfigsDir string
}

// PushCatalog renders the file-based catalog from the bundle images by
// reference — each is pulled by digest and unpacked, and opm's bundle parser
// (operator-registry's registry.NewImageInput and
// ObjectsAndPropertiesFromBundle, what `opm render <bundle image>` runs)
// makes its olm.bundle, named by that digest — validates it, pre-builds
// opm serve's cache of it, and pushes an image index of opm plus the catalog
// under /configs to Ref.
func PushCatalog(ctx context.Context, opts CatalogOptions) (*CatalogResult, error) {
	if len(opts.Bundles) == 0 {
		return nil, fmt.Errorf("no bundle image to put in the catalog")
	}
	if err := os.RemoveAll(opts.WorkDir); err != nil {
		return nil, err
	}
	var dirs []string
	for i, ref := range opts.Bundles {
		d, err := name.NewDigest(ref)
		if err != nil {
			return nil, fmt.Errorf("bundle image %s: name it by digest (repository@sha256:...): %w", ref, err)
		}
		dir := filepath.Join(opts.WorkDir, "bundles", fmt.Sprint(i))
		if err := unpackBundle(ctx, d.String(), dir); err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	cfg, err := catalog.Render(ctx, catalog.Options{Bundles: dirs, Images: opts.Bundles})
	if err != nil {
		return nil, err
	}
	if err := catalog.Validate(cfg); err != nil {
		return nil, err
	}
	configs := filepath.Join(opts.WorkDir, "configs")
	if _, err := catalog.Write(ctx, cfg, configs); err != nil {
		return nil, err
	}
	im, err := BuildCatalogImage(ctx, opts, configs)
	if err != nil {
		return nil, err
	}
	d, err := img.Push(ctx, opts.Ref, im)
	if err != nil {
		return nil, err
	}
	return &CatalogResult{Digest: d, ConfigsDir: configs}, nil
}

// unpackBundle pulls the bundle image ref and unpacks its filesystem into
// dir, checking that it is labelled as a registry+v1 bundle.
func unpackBundle(ctx context.Context, ref, dir string) error {
	desc, err := img.Pull(ctx, ref)
	if err != nil {
		return fmt.Errorf("pulling the bundle image: %w", err)
	}
	im, err := desc.Image()
	if err != nil {
		return fmt.Errorf("bundle image %s: %w", ref, err)
	}
	cf, err := im.ConfigFile()
	if err != nil {
		return err
	}
	if cf.Config.Labels[bundle.KeyMediatype] != "registry+v1" || cf.Config.Labels[bundle.KeyPackage] == "" {
		return fmt.Errorf("%s is not a registry+v1 bundle image: it lacks the %s and %s labels", ref, bundle.KeyMediatype, bundle.KeyPackage)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return img.Unpack(im, dir)
}

// BuildCatalogImage builds the catalog image index of the file-based
// catalog in configs: per platform, opm at /bin/opm, the catalog under
// /configs, opm serve's cache of it under /tmp/cache (built once by this
// machine's opm: the cache is data), /etc/passwd with the numeric non-root
// USER, and the entrypoint `opm serve /configs --cache-dir=/tmp/cache`.
func BuildCatalogImage(ctx context.Context, opts CatalogOptions, configs string) (v1.ImageIndex, error) {
	src, err := ReadSource(ctx, opts.Root)
	if err != nil {
		return nil, err
	}
	host, err := OPM(ctx, opts.Root, v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}, opts.Go)
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(opts.WorkDir, "cache")
	cmd := exec.CommandContext(ctx, host, "serve", configs, "--cache-dir="+cache, "--cache-only")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("opm serve --cache-only: %w\n%s", err, out)
	}
	configFiles, err := img.Tree(configs, ConfigsDir)
	if err != nil {
		return nil, err
	}
	cacheFiles, err := img.Tree(cache, CacheDir)
	if err != nil {
		return nil, err
	}
	// opm serve opens its cache read-write (it takes a lock file in it): the
	// USER owns it, and group 0 may write it too, for OpenShift's arbitrary
	// UIDs (which run in group 0).
	for i := range cacheFiles {
		cacheFiles[i].UID, cacheFiles[i].GID = UID, 0
		cacheFiles[i].Mode |= 0o020
	}
	version, err := OPMVersion(opts.Root)
	if err != nil {
		return nil, err
	}
	labels := origin{src: src, version: opts.Version, sourceURL: opts.SourceURL, licenses: opts.Licenses}.labels("helm-app-operator-catalog",
		"The file-based catalog of helm-app-operator, served by opm "+version+".")
	labels[LabelConfigs] = ConfigsDir
	// opm writes a default /etc/nsswitch.conf when there is none (and warns
	// when it cannot).
	base := baseFiles(img.File{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")})
	binary := func(p v1.Platform) (string, error) { return OPM(ctx, opts.Root, p, opts.Go) }
	return perPlatform("catalog", opts.Platforms, binary, func(p v1.Platform, opm []byte) img.Spec {
		return img.Spec{
			Platform: p,
			Created:  src.Time,
			Layers: []img.LayerSpec{
				{CreatedBy: "helm-app-operator: /etc/passwd (uid 65532), /etc/nsswitch.conf, HOME, /tmp", Files: base},
				{CreatedBy: "helm-app-operator: opm " + version + " (operator-registry cmd/opm, CGO_ENABLED=0)", Files: []img.File{{Path: OPMPath, Mode: 0o755, Data: opm}}},
				{CreatedBy: "helm-app-operator: the file-based catalog", Files: configFiles},
				{CreatedBy: "helm-app-operator: opm serve --cache-only", Files: cacheFiles},
			},
			Entrypoint: []string{OPMPath},
			Cmd:        []string{"serve", ConfigsDir, "--cache-dir=" + CacheDir},
			User:       fmt.Sprintf("%d:%d", UID, UID),
			WorkingDir: "/",
			Env:        []string{"HOME=" + HomeDir},
			Labels:     labels,
		}
	})
}
