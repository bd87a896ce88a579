package ship

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// BundleOptions say which bundle image to make.
type BundleOptions struct {
	// Bundle generates the bundle (Root, Version, Channels, ...). Its Image
	// is the pushed operator image by digest; ImageDigests, KeepUnpinned and
	// RelatedImages (the RELATED_IMAGE_* overrides) are given here too.
	Bundle bundle.Options
	// Strict makes an operand image that resolves to no digest an error;
	// otherwise it keeps its tag, with a warning, and the CSV's
	// disconnected annotation stays false.
	Strict bool
	// OutDir receives the generated bundle (OutDir/bundle/...); the
	// checkout's bundle/ is not touched.
	OutDir string
	// K8sVersion is the validators' look-ahead Kubernetes version.
	K8sVersion string
	// Ref is where the bundle image is pushed (BUNDLE_IMG).
	Ref string
	// Warnings receives one line per image left a tag.
	Warnings io.Writer
}

// BundleResult is what PushBundle made.
type BundleResult struct {
	// Digest is the pushed bundle image (repository@sha256:...).
	Digest name.Digest
	// Dir is the generated bundle directory (manifests/, metadata/, tests/).
	Dir string
	// Unpinned lists the operand images left a tag.
	Unpinned []string
}

// PushBundle generates the bundle with every image pinned to a digest where
// one is known — the operator's (given by digest), each operand's from
// ImageDigests or, failing that, from its registry — validates it (0 errors,
// 0 warnings), builds the bundle image as bundle.Dockerfile describes
// (manifests/, metadata/, tests/scorecard/, and the labels of
// metadata/annotations.yaml) and pushes it to Ref.
func PushBundle(ctx context.Context, opts BundleOptions) (*BundleResult, error) {
	if opts.Warnings == nil {
		opts.Warnings = os.Stderr
	}
	// A first pass, images as tags, lists the operand images.
	first := opts.Bundle
	first.ImageDigests, first.KeepUnpinned = nil, false
	files, err := bundle.Generate(first)
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "bundle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	if err := files.Write(scratch); err != nil {
		return nil, err
	}
	csv, err := bundle.ReadBundleCSV(filepath.Join(scratch, bundle.BundleDir))
	if err != nil {
		return nil, err
	}

	given := map[string]string{}
	for k, v := range opts.Bundle.ImageDigests {
		full, err := qualify(k)
		if err != nil {
			return nil, fmt.Errorf("image digests: %w", err)
		}
		given[full] = v
	}
	digests := map[string]string{}
	var unpinned, unresolved []string
	for _, ri := range csv.Spec.RelatedImages {
		if isDigest(ri.Image) {
			continue
		}
		if d, ok := given[ri.Image]; ok {
			digests[ri.Image] = d
			continue
		}
		d, err := img.Resolve(ctx, ri.Image)
		if err != nil {
			unresolved = append(unresolved, fmt.Sprintf("%s (%s): %v", ri.Image, ri.Name, oneLine(err)))
			unpinned = append(unpinned, ri.Image)
			continue
		}
		digests[ri.Image] = d.DigestStr()
	}
	if len(unresolved) > 0 && opts.Strict {
		return nil, fmt.Errorf("STRICT_DIGESTS: %d image(s) resolve to no digest (give them in IMAGE_DIGESTS, or push them): %s", len(unresolved), strings.Join(unresolved, "; "))
	}
	for _, u := range unresolved {
		fmt.Fprintf(opts.Warnings, "warning: the image %s resolves to no digest: it stays a tag and the bundle is not disconnected-ready\n", u)
	}

	final := opts.Bundle
	final.ImageDigests, final.KeepUnpinned = digests, len(unpinned) > 0
	if files, err = bundle.Generate(final); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(opts.OutDir); err != nil {
		return nil, err
	}
	if err := files.Write(opts.OutDir); err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.OutDir, bundle.BundleDir)
	report, err := bundle.Validate(dir, opts.K8sVersion)
	if err != nil {
		return nil, err
	}
	if n := len(report.Errors) + len(report.Warnings); n > 0 {
		return nil, fmt.Errorf("the bundle in %s does not validate: %d errors, %d warnings: %v", dir, len(report.Errors), len(report.Warnings), append(report.Errors, report.Warnings...))
	}

	im, err := BuildBundleImage(ctx, opts.Bundle.Root, dir)
	if err != nil {
		return nil, err
	}
	d, err := img.Push(ctx, opts.Ref, im)
	if err != nil {
		return nil, err
	}
	return &BundleResult{Digest: d, Dir: dir, Unpinned: unpinned}, nil
}

// BuildBundleImage builds the bundle image of the bundle directory dir, as
// bundle.Dockerfile describes: FROM scratch, manifests/, metadata/ and
// tests/scorecard/ at the root, labelled with metadata/annotations.yaml.
// It is one image (a bundle holds no binary), stamped with root's commit.
func BuildBundleImage(ctx context.Context, root, dir string) (v1.Image, error) {
	src, err := ReadSource(ctx, root)
	if err != nil {
		return nil, err
	}
	labels, err := bundle.ReadBundleAnnotations(dir)
	if err != nil {
		return nil, err
	}
	var files []img.File
	for _, sub := range []string{"manifests", "metadata", "tests/scorecard"} {
		fs, err := img.Tree(filepath.Join(dir, sub), "/"+sub)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	return img.Build(img.Spec{
		Platform: v1.Platform{OS: "linux", Architecture: "amd64"},
		Created:  src.Time,
		Layers:   []img.LayerSpec{{CreatedBy: "helm-app-operator: bundle manifests/, metadata/, tests/scorecard/", Files: files}},
		Labels:   labels,
	})
}

// qualify names image fully (docker.io/library/..., :latest when untagged).
func qualify(image string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return reference.TagNameOnly(ref).String(), nil
}

func isDigest(image string) bool {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	_, ok := ref.(reference.Digested)
	return ok
}

// oneLine keeps the first line of an error.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
