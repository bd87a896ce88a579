// Command ship builds and pushes the operator, bundle and catalog images in
// pure Go, with no container engine (see internal/tooling/ship). make image-build,
// image-push, bundle-push and catalog-push call it; credentials come from
// ~/.docker/config.json (go-containerregistry's default keychain).
//
//	go run ./hack/ship operator --image REF [--push] [--platforms linux/amd64,...] [--layout DIR]
//	go run ./hack/ship bundle --image REF --bundle-image REF [--related-image RELATED_IMAGE_X=REF]... [--strict]
//	go run ./hack/ship catalog --bundle-image REF --catalog-image REF
//
// Each push prints the pushed reference by digest on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
	"github.com/helmapp/helm-app-operator/internal/tooling/ship"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: ship operator|bundle|catalog [flags]"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// opm's bundle parser logs every optional file it does not find.
	logrus.SetLevel(logrus.WarnLevel)
	var err error
	switch os.Args[1] {
	case "operator":
		err = operator(ctx, os.Args[2:])
	case "bundle":
		err = bundlePush(ctx, os.Args[2:])
	case "catalog":
		err = catalogPush(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want operator, bundle or catalog", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

// common are the flags every command has.
type common struct {
	root, platforms, version, source, licenses string
}

func (c *common) bind(fs *flag.FlagSet, platforms string) {
	fs.StringVar(&c.root, "root", ".", "The checkout.")
	fs.StringVar(&c.platforms, "platforms", platforms, "Comma-separated os/arch list, one image each in the index.")
	fs.StringVar(&c.version, "version", "0.1.0", "The operator's version (org.opencontainers.image.version).")
	fs.StringVar(&c.source, "source", "https://github.com/helmapp/helm-app-operator", "org.opencontainers.image.source.")
	fs.StringVar(&c.licenses, "licenses", "Apache-2.0", "org.opencontainers.image.licenses (SPDX).")
}

func operator(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("operator", flag.ExitOnError)
	var c common
	c.bind(fs, ship.DefaultPlatforms)
	ref := fs.String("image", "", "The operator image (IMG).")
	push := fs.Bool("push", false, "Push the image to --image.")
	layoutDir := fs.String("layout", "bin/image/operator", "Write the image to this OCI layout directory.")
	_ = fs.Parse(args)
	platforms, err := img.ParsePlatforms(c.platforms)
	if err != nil {
		return err
	}
	idx, err := ship.BuildOperator(ctx, ship.OperatorOptions{Root: c.root, Platforms: platforms, Version: c.version,
		SourceURL: c.source, Licenses: c.licenses, BinDir: "bin/image/managers"})
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if *layoutDir != "" {
		if err := img.WriteLayout(*layoutDir, *ref, idx); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote the operator image (%s, %d platforms) to the OCI layout %s\n", d, len(platforms), *layoutDir)
	}
	if *push {
		pushed, err := img.Push(ctx, *ref, idx)
		if err != nil {
			return err
		}
		fmt.Println("operator image:", pushed)
	}
	return nil
}

// relatedImages collects --related-image NAME=REF flags.
type relatedImages map[string]string

func (r relatedImages) String() string { return fmt.Sprint(map[string]string(r)) }
func (r relatedImages) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(k, "RELATED_IMAGE_") || v == "" {
		return fmt.Errorf("want RELATED_IMAGE_<NAME>=<image>, got %q", s)
	}
	r[k] = v
	return nil
}

func bundlePush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bundle", flag.ExitOnError)
	var c common
	c.bind(fs, "")
	var o ship.BundleOptions
	var channels, digests string
	related := relatedImages{}
	image := fs.String("image", "", "The operator image (IMG); resolved to the digest its registry has.")
	fs.StringVar(&o.Ref, "bundle-image", "", "Where to push the bundle image (BUNDLE_IMG).")
	fs.StringVar(&channels, "channels", "candidate", "Comma-separated channels.")
	fs.StringVar(&o.Bundle.DefaultChannel, "default-channel", "", "The default channel; the first when empty.")
	fs.StringVar(&o.Bundle.OpenShiftVersions, "openshift-versions", "v4.17", "com.redhat.openshift.versions.")
	fs.StringVar(&o.K8sVersion, "k8s-version", bundle.DefaultK8sVersion, "Kubernetes version the deprecated-API checks look ahead to.")
	fs.StringVar(&o.Bundle.Replaces, "replaces", "", "spec.replaces.")
	fs.StringVar(&o.Bundle.SkipRange, "skip-range", "", "olm.skipRange.")
	fs.StringVar(&digests, "image-digests", "", "A YAML file mapping images (as config/ names them) to digests; images it lacks are resolved from their registry.")
	fs.Var(related, "related-image", "RELATED_IMAGE_<NAME>=<image>: override an operand image of config/manager (repeatable).")
	fs.BoolVar(&o.Strict, "strict", false, "Fail when an operand image resolves to no digest (STRICT_DIGESTS=1).")
	fs.StringVar(&o.OutDir, "out", "bin/ship/bundle", "Write the pinned bundle under this directory (the checkout's bundle/ is not touched).")
	_ = fs.Parse(args)
	if *image == "" || o.Ref == "" {
		return fmt.Errorf("bundle: --image (IMG) and --bundle-image (BUNDLE_IMG) are required")
	}
	manager, err := img.Resolve(ctx, *image)
	if err != nil {
		return fmt.Errorf("the operator image %s: %w (push it first: make image-push)", *image, err)
	}
	o.Bundle.Root, o.Bundle.Version, o.Bundle.Image = c.root, c.version, manager.String()
	o.Bundle.Channels = strings.Split(channels, ",")
	o.Bundle.CreatedAt = time.Now()
	o.Bundle.RelatedImages = related
	if digests != "" {
		if o.Bundle.ImageDigests, err = bundle.ReadDigests(digests); err != nil {
			return err
		}
	}
	res, err := ship.PushBundle(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote the pinned bundle to %s (0 errors, 0 warnings)\n", res.Dir)
	fmt.Println("bundle image:", res.Digest)
	return nil
}

func catalogPush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("catalog", flag.ExitOnError)
	var c common
	c.bind(fs, ship.DefaultPlatforms)
	var o ship.CatalogOptions
	bundles := fs.String("bundle-image", "", "Comma-separated bundle images (BUNDLE_IMG), oldest first; each resolved to its digest.")
	fs.StringVar(&o.Ref, "catalog-image", "", "Where to push the catalog image (CATALOG_IMG).")
	fs.StringVar(&o.WorkDir, "out", "bin/ship/catalog", "Write the rendered catalog and its cache under this directory.")
	_ = fs.Parse(args)
	if *bundles == "" || o.Ref == "" {
		return fmt.Errorf("catalog: --bundle-image (BUNDLE_IMG) and --catalog-image (CATALOG_IMG) are required")
	}
	var err error
	if o.Platforms, err = img.ParsePlatforms(c.platforms); err != nil {
		return err
	}
	for _, b := range strings.Split(*bundles, ",") {
		d, err := img.Resolve(ctx, b)
		if err != nil {
			return fmt.Errorf("the bundle image %s: %w (push it first: make bundle-push)", b, err)
		}
		o.Bundles = append(o.Bundles, d.String())
	}
	o.Root, o.Version, o.SourceURL, o.Licenses = c.root, c.version, c.source, c.licenses
	res, err := ship.PushCatalog(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "rendered the catalog into %s\n", res.ConfigsDir)
	fmt.Println("catalog image:", res.Digest)
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
