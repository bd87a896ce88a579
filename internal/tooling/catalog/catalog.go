// Package catalog makes and checks a file-based catalog (FBC) of the
// operator's bundles, what `opm render`, `opm init` and `opm validate` do,
// with opm's own library (operator-registry): an olm.package, one olm.channel
// per channel the bundles name, and one olm.bundle per bundle. The channel
// entries carry each CSV's replaces, skips and olm.skipRange, so the
// catalog's upgrade graph is the one the bundles declare, and validation is
// the graph check OLM's catalog operator relies on (one head per channel, no
// dangling or cyclic edges, a default channel that exists).
package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/pkg/image"
	"github.com/operator-framework/operator-registry/pkg/lib/config"
	"github.com/operator-framework/operator-registry/pkg/registry"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// DefaultImageTemplate names a bundle's image from its version, as
// `make bundle-build` tags it (BUNDLE_IMG).
const DefaultImageTemplate = "quay.io/helmapp/helm-app-operator-bundle:v{{.Version}}"

// Options say which catalog to make.
type Options struct {
	// Bundles are bundle directories (each holding manifests/ and metadata/),
	// one per version, all of one package.
	Bundles []string
	// ImageTemplate is the bundle image, a text/template over .Package,
	// .Name (the CSV's) and .Version.
	ImageTemplate string
	// Images, when set, name each bundle's image (one per bundle, in order)
	// instead of ImageTemplate: for bundles unpacked from pushed images,
	// named by digest.
	Images []string
}

// Render renders the bundles into one declarative config; see the package
// documentation. The default channel is the one the highest version's
// annotations name.
func Render(ctx context.Context, opts Options) (*declcfg.DeclarativeConfig, error) {
	if len(opts.Bundles) == 0 {
		return nil, errors.New("no bundle to render")
	}
	if opts.Images != nil && len(opts.Images) != len(opts.Bundles) {
		return nil, fmt.Errorf("%d bundle images for %d bundles", len(opts.Images), len(opts.Bundles))
	}
	if opts.ImageTemplate == "" {
		opts.ImageTemplate = DefaultImageTemplate
	}
	tmpl, err := template.New("image").Parse(opts.ImageTemplate)
	if err != nil {
		return nil, fmt.Errorf("bundle image template: %w", err)
	}
	cfg := &declcfg.DeclarativeConfig{}
	var (
		pkg      string
		highest  semver.Version
		defaultC string
		icon     *declcfg.Icon
		channels = map[string]*declcfg.Channel{}
		order    []string
	)
	for i, dir := range opts.Bundles {
		csv, err := bundle.ReadBundleCSV(dir)
		if err != nil {
			return nil, err
		}
		ann, err := bundle.ReadBundleAnnotations(dir)
		if err != nil {
			return nil, err
		}
		p := ann[bundle.KeyPackage]
		if pkg == "" {
			pkg = p
		} else if p != pkg {
			return nil, fmt.Errorf("bundle %s is of package %q, not %q: a catalog here holds one package", dir, p, pkg)
		}
		if v := csv.Spec.Version.Version; pkg == p && (highest.Equals(semver.Version{}) || v.GT(highest)) {
			highest, defaultC = v, ann[bundle.KeyDefaultChannel]
			if len(csv.Spec.Icon) > 0 {
				icon = &declcfg.Icon{Data: []byte(csv.Spec.Icon[0].Data), MediaType: csv.Spec.Icon[0].MediaType}
			}
		}
		var img strings.Builder
		if err := tmpl.Execute(&img, struct{ Package, Name, Version string }{p, csv.Name, csv.Spec.Version.String()}); err != nil {
			return nil, fmt.Errorf("bundle image template: %w", err)
		}
		ref := img.String()
		if opts.Images != nil {
			ref = opts.Images[i]
		}
		b, err := renderBundle(dir, ref)
		if err != nil {
			return nil, err
		}
		cfg.Bundles = append(cfg.Bundles, *b)
		entry := declcfg.ChannelEntry{Name: csv.Name, Replaces: csv.Spec.Replaces, Skips: csv.Spec.Skips,
			SkipRange: csv.Annotations["olm.skipRange"]}
		for _, ch := range strings.Split(ann[bundle.KeyChannels], ",") {
			c := channels[ch]
			if c == nil {
				c = &declcfg.Channel{Schema: declcfg.SchemaChannel, Name: ch, Package: pkg}
				channels[ch] = c
				order = append(order, ch)
			}
			c.Entries = append(c.Entries, entry)
		}
	}
	if icon != nil {
		// declcfg keeps the icon's data base64-decoded.
		if data, err := decodeBase64(icon.Data); err == nil {
			icon.Data = data
		}
	}
	cfg.Packages = []declcfg.Package{{Schema: declcfg.SchemaPackage, Name: pkg, DefaultChannel: defaultC, Icon: icon}}
	slices.Sort(order)
	for _, ch := range order {
		cfg.Channels = append(cfg.Channels, *channels[ch])
	}
	return cfg, nil
}

// Validate checks cfg as opm does: it converts it to opm's model, which
// validates every package, channel graph and bundle.
func Validate(cfg *declcfg.DeclarativeConfig) error {
	_, err := declcfg.ConvertToModel(*cfg)
	return err
}

// Write writes cfg as <dir>/<package>/catalog.yaml, replacing dir, and
// validates what it wrote the way `opm validate <dir>` does.
func Write(ctx context.Context, cfg *declcfg.DeclarativeConfig, dir string) (string, error) {
	if len(cfg.Packages) != 1 {
		return "", fmt.Errorf("want one package, have %d", len(cfg.Packages))
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	pkgDir := filepath.Join(dir, cfg.Packages[0].Name)
	if err := os.MkdirAll(pkgDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(pkgDir, "catalog.yaml")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := declcfg.WriteYAML(*cfg, f); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := config.Validate(ctx, os.DirFS(dir)); err != nil {
		return "", fmt.Errorf("%s does not validate: %w", dir, err)
	}
	return path, nil
}

// renderBundle turns the bundle directory dir into an olm.bundle, as
// `opm render <dir>` does: opm's bundle parser reads it, and its properties
// (package, version, provided and required APIs, the manifests as
// olm.bundle.object) come from opm's own conversion. The related images are
// the CSV's and the bundle image itself.
func renderBundle(dir, bundleImage string) (*declcfg.Bundle, error) {
	in, err := registry.NewImageInput(image.SimpleReference(bundleImage), dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	b := in.Bundle
	objs, props, err := registry.ObjectsAndPropertiesFromBundle(b)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	csv, err := bundle.ReadBundleCSV(dir)
	if err != nil {
		return nil, err
	}
	out := &declcfg.Bundle{Schema: declcfg.SchemaBundle, Name: b.Name, Package: b.Package, Image: bundleImage,
		Properties: props, Objects: objs}
	for _, o := range b.Objects {
		if o.GetKind() == "ClusterServiceVersion" {
			js, err := json.Marshal(o)
			if err != nil {
				return nil, err
			}
			out.CsvJSON = string(js)
		}
	}
	seen := map[string]bool{}
	for _, ri := range csv.Spec.RelatedImages {
		if !seen[ri.Image] {
			seen[ri.Image] = true
			out.RelatedImages = append(out.RelatedImages, declcfg.RelatedImage{Name: ri.Name, Image: ri.Image})
		}
	}
	if !seen[bundleImage] {
		out.RelatedImages = append(out.RelatedImages, declcfg.RelatedImage{Image: bundleImage})
	}
	return out, nil
}

func decodeBase64(b []byte) ([]byte, error) {
	out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Decode(out, b)
	return out[:n], err
}
