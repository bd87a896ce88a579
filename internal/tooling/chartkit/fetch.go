package chartkit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/registry"
	"sigs.k8s.io/yaml"
)

// Source is where a chart comes from, as the command's flags give it.
type Source struct {
	// Chart is a chart directory, a .tgz, oci://host/repo/name or a chart
	// repository's URL (http:// or https://).
	Chart string
	// Name is the chart's name in a chart repository (Chart is its URL).
	Name string
	// Version is the chart's version; required for OCI and repositories.
	Version string
	// PlainHTTP talks to an OCI registry over plain HTTP (helm --plain-http),
	// e.g. a registry on the loopback address.
	PlainHTTP bool
}

// kind of source, for messages.
func (s Source) String() string {
	switch {
	case registry.IsOCI(s.Chart):
		return s.Chart + ":" + s.Version
	case isURL(s.Chart):
		return fmt.Sprintf("%s from %s version %s", s.Name, s.Chart, s.Version)
	default:
		return s.Chart
	}
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// fetch materializes the chart of src as a directory under work (a scratch
// directory fetch may fill as it likes) with its dependencies resolved into
// charts/, and returns that directory and the loaded chart.
//
// A directory or .tgz on disk is copied (a directory honours .helmignore, as
// `helm package` does); an OCI reference is pulled with Helm's registry
// client and pull action; a repository chart with the pull action, after
// reading the repository's index.yaml. Dependencies that Chart.yaml lists and
// charts/ lacks are then downloaded with Helm's dependency manager from the
// repositories they name (URL, oci:// or file://, the latter resolved
// against the source's directory), as `helm dependency build` does.
func fetch(src Source, work string, log io.Writer) (string, *chart.Chart, error) {
	if src.Chart == "" {
		return "", nil, fmt.Errorf("no chart given (--chart DIR, FILE.tgz, oci://HOST/REPO/NAME or a repository URL)")
	}
	settings := cli.New()
	// Repository indexes and the dependency manager's state go to the scratch
	// directory: the command neither reads nor changes the user's `helm repo`
	// list, so its result depends only on its input.
	settings.RepositoryConfig = filepath.Join(work, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(work, "cache")
	staging := filepath.Join(work, "chart")
	base := "" // where file:// dependencies resolve

	switch {
	case registry.IsOCI(src.Chart) || isURL(src.Chart):
		if src.Version == "" {
			return "", nil, fmt.Errorf("%s: --chart-version is required for a chart from a registry or a repository", src.Chart)
		}
		if isURL(src.Chart) && src.Name == "" {
			return "", nil, fmt.Errorf("%s: --name (the chart's name in the repository) is required with a repository URL", src.Chart)
		}
		tgz, err := pull(src, settings, work)
		if err != nil {
			return "", nil, err
		}
		if err := expandInto(tgz, staging); err != nil {
			return "", nil, err
		}
	case strings.HasSuffix(src.Chart, ".tgz") || strings.HasSuffix(src.Chart, ".tar.gz"):
		if err := expandInto(src.Chart, staging); err != nil {
			return "", nil, err
		}
		base = filepath.Dir(src.Chart)
	default:
		fi, err := os.Stat(src.Chart)
		if err != nil {
			return "", nil, fmt.Errorf("chart %s: %w", src.Chart, err)
		}
		if !fi.IsDir() {
			return "", nil, fmt.Errorf("chart %s: not a directory, a .tgz, an oci:// reference or a repository URL", src.Chart)
		}
		ch, err := loader.LoadDir(src.Chart)
		if err != nil {
			return "", nil, fmt.Errorf("chart %s: %w", src.Chart, err)
		}
		// The loaded chart's Raw files are what .helmignore lets through.
		if err := writeFiles(staging, ch.Raw); err != nil {
			return "", nil, err
		}
		base = src.Chart
	}

	if err := resolveDependencies(staging, base, settings, src.PlainHTTP, log); err != nil {
		return "", nil, err
	}
	ch, err := loader.LoadDir(staging)
	if err != nil {
		return "", nil, fmt.Errorf("chart %s: %w", src, err)
	}
	if err := ch.Validate(); err != nil {
		return "", nil, fmt.Errorf("chart %s: %w", src, err)
	}
	if err := action.CheckDependencies(ch, ch.Metadata.Dependencies); err != nil {
		return "", nil, fmt.Errorf("chart %s: %w", src, err)
	}
	return staging, ch, nil
}

// registryClient is Helm's OCI client, with the user's registry credentials
// (helm registry login) and, for a plain-HTTP registry, without TLS.
func registryClient(settings *cli.EnvSettings, plainHTTP bool) (*registry.Client, error) {
	opts := []registry.ClientOption{registry.ClientOptCredentialsFile(settings.RegistryConfig), registry.ClientOptWriter(io.Discard)}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	return registry.NewClient(opts...)
}

// pull downloads the chart's .tgz into work with Helm's pull action and
// returns its path.
func pull(src Source, settings *cli.EnvSettings, work string) (string, error) {
	rc, err := registryClient(settings, src.PlainHTTP)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(work, "download")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return "", err
	}
	p := action.NewPullWithOpts(action.WithConfig(&action.Configuration{RegistryClient: rc}))
	p.Settings = settings
	p.Version = src.Version
	p.DestDir = dest
	p.PlainHTTP = src.PlainHTTP
	ref := src.Chart
	if isURL(src.Chart) {
		p.RepoURL = src.Chart
		ref = src.Name
	}
	if _, err := p.Run(ref); err != nil {
		return "", fmt.Errorf("pull %s: %w", src, err)
	}
	entries, err := os.ReadDir(dest)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tgz") {
			return filepath.Join(dest, e.Name()), nil
		}
	}
	return "", fmt.Errorf("pull %s: no chart archive was downloaded", src)
}

// expandInto unpacks the chart archive tgz into dir (its top folder, the
// chart's name, becomes dir).
func expandInto(tgz, dir string) error {
	tmp := dir + ".expand"
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := chartutil.ExpandFile(tmp, tgz); err != nil {
		return fmt.Errorf("chart %s: %w", tgz, err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	if len(entries) != 1 || !entries[0].IsDir() {
		return fmt.Errorf("chart %s: the archive holds more than one top folder", tgz)
	}
	return os.Rename(filepath.Join(tmp, entries[0].Name()), dir)
}

// writeFiles writes a chart's files under dir.
func writeFiles(dir string, files []*chart.File) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// resolveDependencies downloads into dir/charts the dependencies that
// dir/Chart.yaml lists and charts/ does not hold. file:// repositories are
// resolved against base, the directory the chart came from; Chart.yaml is
// rewritten for the dependency manager and put back byte for byte after.
func resolveDependencies(dir, base string, settings *cli.EnvSettings, plainHTTP bool, log io.Writer) error {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return err
	}
	if len(ch.Metadata.Dependencies) == 0 || action.CheckDependencies(ch, ch.Metadata.Dependencies) == nil {
		return nil
	}
	chartYAML := filepath.Join(dir, "Chart.yaml")
	orig, err := os.ReadFile(chartYAML)
	if err != nil {
		return err
	}
	rewritten := false
	for _, d := range ch.Metadata.Dependencies {
		if rel, ok := strings.CutPrefix(d.Repository, "file://"); ok && !filepath.IsAbs(rel) {
			if base == "" {
				return fmt.Errorf("dependency %s: %s is relative to a chart on disk; vendor its charts/ first", d.Name, d.Repository)
			}
			abs, err := filepath.Abs(filepath.Join(base, rel))
			if err != nil {
				return err
			}
			d.Repository = "file://" + abs
			rewritten = true
		}
	}
	if rewritten {
		// A lock written for the original paths would not match; the
		// source's own lock (if any) is put back after the build.
		lockPath := filepath.Join(dir, "Chart.lock")
		lock, err := os.ReadFile(lockPath)
		switch {
		case err == nil:
			defer os.WriteFile(lockPath, lock, 0o644) //nolint:errcheck // checked by the load that follows
		case !os.IsNotExist(err):
			return err
		}
		if err := os.Remove(lockPath); err != nil && !os.IsNotExist(err) {
			return err
		}
		out, err := yaml.Marshal(ch.Metadata)
		if err != nil {
			return err
		}
		if err := os.WriteFile(chartYAML, out, 0o644); err != nil {
			return err
		}
		defer os.WriteFile(chartYAML, orig, 0o644) //nolint:errcheck // checked by the load that follows
	}
	rc, err := registryClient(settings, plainHTTP)
	if err != nil {
		return err
	}
	m := &downloader.Manager{
		Out:              log,
		ChartPath:        dir,
		Getters:          getter.All(settings),
		RegistryClient:   rc,
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
	}
	if err := m.Build(); err != nil {
		return fmt.Errorf("dependencies of %s: %w", ch.Name(), err)
	}
	if rewritten {
		// The lock just written names this machine's absolute paths.
		if err := os.Remove(filepath.Join(dir, "Chart.lock")); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}
