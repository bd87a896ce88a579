package ship

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// The operator image's layout. The manager resolves --watches-file (default
// watches.yaml) and the chart paths in it against its working directory.
const (
	ManagerPath = "/manager"
	WorkDir     = "/opt/helm"
	// UID is the image's numeric non-root USER (and its group), so that a
	// pod's runAsNonRoot can be checked without a name lookup.
	UID      = 65532
	UserName = "nonroot"
	HomeDir  = "/home/nonroot"
)

// DefaultPlatforms are the architectures OpenShift runs on.
const DefaultPlatforms = "linux/amd64,linux/arm64,linux/ppc64le,linux/s390x"

// OCI annotation keys the images' configs carry as labels.
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelVersion     = "org.opencontainers.image.version"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelCreated     = "org.opencontainers.image.created"
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
)

// OperatorOptions say which operator image to build.
type OperatorOptions struct {
	// Root is the checkout (main.go, watches.yaml, helm-charts/).
	Root string
	// Platforms to build, one image each in the index.
	Platforms []v1.Platform
	// Version, SourceURL and Licenses become OCI labels.
	Version, SourceURL, Licenses string
	// BinDir receives the cross-compiled managers (manager-<os>-<arch>).
	BinDir string
	// Go is the go command; "go" when empty.
	Go string
	// StandIns are binaries put in the image in place of the manager, by
	// platform ("linux/arm64"), so that a test can check the index's shape
	// without cross-compiling the whole manager for every platform. make
	// image-push never sets it: every platform gets the real manager.
	StandIns map[string]string
}

// BuildOperator cross-compiles the manager for each platform but those of
// StandIns (static: CGO_ENABLED=0, -trimpath) and assembles the operator
// image index: per platform, /etc/passwd with the numeric non-root USER, a
// writable HOME and /tmp, watches.yaml and helm-charts/ under the working
// directory, and the manager as the entrypoint.
func BuildOperator(ctx context.Context, opts OperatorOptions) (v1.ImageIndex, error) {
	src, err := ReadSource(ctx, opts.Root)
	if err != nil {
		return nil, err
	}
	watches, err := os.ReadFile(filepath.Join(opts.Root, "watches.yaml"))
	if err != nil {
		return nil, err
	}
	charts, err := img.Tree(filepath.Join(opts.Root, "helm-charts"), WorkDir+"/helm-charts")
	if err != nil {
		return nil, err
	}
	labels := origin{src: src, version: opts.Version, sourceURL: opts.SourceURL, licenses: opts.Licenses}.labels("helm-app-operator",
		"Turns custom resources into Helm releases and reports the truth about them in their status.")
	base := baseFiles()
	app := append([]img.File{
		img.Dir(WorkDir, 0o755, 0, 0),
		{Path: WorkDir + "/watches.yaml", Mode: 0o644, Data: watches},
	}, charts...)

	binary := func(p v1.Platform) (string, error) {
		if bin, ok := opts.StandIns[p.String()]; ok {
			return bin, nil
		}
		return buildManager(ctx, opts, p)
	}
	return perPlatform("operator", opts.Platforms, binary, func(p v1.Platform, manager []byte) img.Spec {
		return img.Spec{
			Platform: p,
			Created:  src.Time,
			Layers: []img.LayerSpec{
				{CreatedBy: "helm-app-operator: /etc/passwd (uid 65532), HOME, /tmp", Files: base},
				{CreatedBy: "helm-app-operator: watches.yaml, helm-charts/", Files: app},
				{CreatedBy: "helm-app-operator: the manager (CGO_ENABLED=0 go build -trimpath)", Files: []img.File{{Path: ManagerPath, Mode: 0o755, Data: manager}}},
			},
			Entrypoint: []string{ManagerPath},
			User:       fmt.Sprintf("%d:%d", UID, UID),
			WorkingDir: WorkDir,
			Env:        []string{"HOME=" + HomeDir, "TMPDIR=/tmp"},
			Labels:     labels,
		}
	})
}

// buildManager cross-compiles the manager for p into BinDir and returns
// the binary's path.
func buildManager(ctx context.Context, opts OperatorOptions, p v1.Platform) (string, error) {
	out := filepath.Join(opts.BinDir, fmt.Sprintf("manager-%s-%s", p.OS, p.Architecture))
	if err := os.MkdirAll(opts.BinDir, 0o755); err != nil {
		return "", err
	}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Architecture == "arm" && p.Variant != "" {
		env = append(env, "GOARM="+p.Variant[1:])
	}
	if err := goBuild(ctx, opts.Go, opts.Root, env, out, "-ldflags=-s -w", "."); err != nil {
		return "", fmt.Errorf("building the manager for %s: %w", p, err)
	}
	return out, nil
}

// goBuild runs `go build -trimpath -o out args...` in dir.
func goBuild(ctx context.Context, goCmd, dir string, env []string, out string, args ...string) error {
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"build", "-trimpath", "-o", out}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, b)
	}
	return nil
}

// baseFiles are the files of every image's first layer: the /etc/passwd
// entry of the numeric non-root USER, its HOME and /tmp, then extra.
func baseFiles(extra ...img.File) []img.File {
	files := append(img.Passwd(UID, UserName, HomeDir),
		// Group 0 may write HOME too: OpenShift runs the image as an
		// arbitrary UID in group 0.
		img.Dir(HomeDir, 0o775, UID, 0),
		img.Dir("/tmp", 0o777|os.ModeSticky, 0, 0))
	return append(files, extra...)
}

// perPlatform builds one image a platform, the image spec makes around the
// binary at binary(p) (read whole), and returns their index; what names the
// image in errors.
func perPlatform(what string, platforms []v1.Platform, binary func(v1.Platform) (string, error), spec func(p v1.Platform, bin []byte) img.Spec) (v1.ImageIndex, error) {
	var images []v1.Image
	for _, p := range platforms {
		path, err := binary(p)
		if err != nil {
			return nil, err
		}
		bin, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		im, err := img.Build(spec(p, bin))
		if err != nil {
			return nil, fmt.Errorf("%s image for %s: %w", what, p, err)
		}
		images = append(images, im)
	}
	return img.Index(images)
}

// origin is where an image comes from: the source it is built from and
// what the Makefile says of it.
type origin struct {
	src                          Source
	version, sourceURL, licenses string
}

// labels are the OCI labels of an image of origin o, with its title and
// description.
func (o origin) labels(title, description string) map[string]string {
	return map[string]string{
		LabelSource:      o.sourceURL,
		LabelRevision:    o.src.Revision,
		LabelVersion:     o.version,
		LabelLicenses:    o.licenses,
		LabelCreated:     o.src.Time.Format("2006-01-02T15:04:05Z"),
		LabelTitle:       title,
		LabelDescription: description,
	}
}
