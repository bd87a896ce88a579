// Package chartkit makes an operator author's Helm chart a kind of this
// operator, and takes it away again: the library behind `go run ./hack/chart`
// (make chart, make chart-remove).
//
// Add fetches the chart (a directory, a .tgz, an OCI reference or a chart
// repository), vendors it with its dependencies under helm-charts/<name>, and
// writes every project file a kind needs: its watches.yaml entry (with
// RELATED_IMAGE_* overrides for the images of the chart's defaults and the
// scope of what it creates), the manager's RELATED_IMAGE_* variables, its
// CRD (config/crd, as `make manifests`), a sample, editor and viewer roles,
// the PROJECT entry and the base CSV's owned CRD; the RBAC files come from
// internal/tooling/chartrbac. Every file is written only when its bytes
// change, so adding the same chart twice changes nothing, and an update keeps
// what the command does not own (other watches fields, an edited sample, an
// author's descriptors). Remove undoes all of it.
package chartkit

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	hopwatches "github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/tooling/chartrbac"
	"github.com/helmapp/helm-app-operator/internal/tooling/crdgen"
)

// Options are the command's input.
type Options struct {
	// Root is the project's root directory.
	Root string
	Source
	// Kind is the new kind. Group and APIVersion default to the kind's own
	// when it exists (an update keeps them), else to the chart's name
	// (letters and digits only) and v1alpha1; a group without a dot gets the
	// PROJECT domain appended.
	Kind, Group, APIVersion string
	// CRDs is where the chart's crds/ go: CRDsOperator (the operator
	// applies them; the default for a new kind) or CRDsBundle (they ship
	// with the operator); empty keeps an existing kind's choice.
	CRDs string
	// Log receives Helm's progress lines (dependency downloads); nil
	// discards them.
	Log io.Writer
}

// DefaultAPIVersion is the version of a new kind when none is given.
const DefaultAPIVersion = "v1alpha1"

// chartsDir holds the vendored charts, relative to the root.
const chartsDir = "helm-charts"

var (
	kindPattern    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	versionPattern = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
	groupPattern   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
)

// Add makes the chart of opts a kind of the project at opts.Root (see the
// package comment) and reports what it did and what the author must check.
func Add(opts Options) (*Report, error) {
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	if !kindPattern.MatchString(opts.Kind) {
		return nil, fmt.Errorf("--kind %q: want a Kubernetes kind, CamelCase starting with an upper-case letter (e.g. SealedSecrets)", opts.Kind)
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}

	work, err := os.MkdirTemp("", "chartkit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	staged, fetched, err := fetch(opts.Source, work, log)
	if err != nil {
		return nil, err
	}

	names, err := kindNamesFor(root, opts, fetched)
	if err != nil {
		return nil, err
	}
	if err := checkConflicts(root, names, opts.Source); err != nil {
		return nil, err
	}

	before, err := snapshot(root)
	if err != nil {
		return nil, err
	}
	rep := &Report{Names: names, Source: opts.Source.String(), ChartVersion: fetched.Metadata.Version}
	if err := renameFiles(root, names); err != nil {
		return nil, err
	}
	if err := addFiles(root, names, staged, opts.CRDs, rep); err != nil {
		return nil, err
	}
	after, err := snapshot(root)
	if err != nil {
		return nil, err
	}
	rep.Changed = changedFiles(before, after)
	return rep, nil
}

// kindNamesFor settles the kind's group, version and plural.
func kindNamesFor(root string, opts Options, ch *chart.Chart) (kindNames, error) {
	group, version := opts.Group, opts.APIVersion
	entries, err := readWatches(root)
	if err != nil {
		return kindNames{}, err
	}
	for _, e := range entries {
		if e.Kind == opts.Kind {
			group = cmp.Or(group, e.Group)
			version = cmp.Or(version, e.Version)
		}
	}
	version = cmp.Or(version, DefaultAPIVersion)
	if !versionPattern.MatchString(version) {
		return kindNames{}, fmt.Errorf("--api-version %q: want a Kubernetes API version such as v1alpha1, v1beta1 or v1", version)
	}
	if group == "" {
		group = strings.Map(func(r rune) rune {
			if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
				return r
			}
			return -1
		}, strings.ToLower(ch.Name()))
	}
	if !strings.Contains(group, ".") {
		domain, err := projectDomain(root)
		if err != nil {
			return kindNames{}, err
		}
		if domain == "" {
			return kindNames{}, fmt.Errorf("--group %q has no dot and the PROJECT file names no domain to append", group)
		}
		group += "." + domain
	}
	if !groupPattern.MatchString(group) || len(group) > 253 {
		return kindNames{}, fmt.Errorf("--group %q: want a DNS subdomain such as web.helmapp.io", group)
	}
	crdNames, err := crdgen.Names(opts.Kind, ch.Metadata)
	if err != nil {
		return kindNames{}, err
	}
	return kindNames{
		Group: group, Version: version, Kind: opts.Kind, Plural: crdNames.Plural,
		Chart: chartsDir + "/" + ch.Name(),
	}, nil
}

// checkConflicts refuses an add that would take another kind's chart or
// give a kind a second chart, or overwrite a folder of helm-charts/ that the
// command did not vendor.
func checkConflicts(root string, k kindNames, src Source) error {
	entries, err := readWatches(root)
	if err != nil {
		return err
	}
	known := false
	for _, e := range entries {
		switch {
		case e.Kind == k.Kind && filepath.Clean(e.Chart) != k.Chart:
			return fmt.Errorf("kind %s already serves the chart %s, not %s; remove it first (make chart-remove KIND=%s)", k.Kind, e.Chart, k.Chart, k.Kind)
		case e.Kind != k.Kind && filepath.Clean(e.Chart) == k.Chart:
			return fmt.Errorf("%s is already the chart of kind %s; remove that kind first (make chart-remove KIND=%s)", k.Chart, e.Kind, e.Kind)
		case e.Kind == k.Kind:
			known = true
		}
	}
	dest := filepath.Join(root, filepath.FromSlash(k.Chart))
	if _, err := os.Stat(dest); err == nil && !known {
		if abs, err := filepath.Abs(src.Chart); err != nil || abs != dest {
			return fmt.Errorf("%s exists and no kind of watches.yaml uses it; move it away first (the command replaces the folders it vendored only)", k.Chart)
		}
	}
	return nil
}

// renameFiles removes the files named after the kind's former group or
// version when an add moves an existing kind to new ones: its CRD's
// kustomization entry (crdgen.Sync removes the CRD file itself) and its
// sample, which addFiles then writes anew under the new name.
func renameFiles(root string, k kindNames) error {
	entries, err := readWatches(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Kind != k.Kind || (e.Group == k.Group && e.Version == k.Version) {
			continue
		}
		old := k
		old.Group, old.Version = e.Group, e.Version
		if _, err := removeResource(filepath.Join(root, crdKustomization), "bases/"+old.crdFile()); err != nil {
			return err
		}
		if old.sampleFile() != k.sampleFile() {
			if _, err := removeIfExists(filepath.Join(root, old.samplePath())); err != nil {
				return err
			}
			if _, err := removeResource(filepath.Join(root, samplesKustomization), old.sampleFile()); err != nil {
				return err
			}
		}
	}
	return nil
}

// addFiles vendors the staged chart and writes the project files.
func addFiles(root string, k kindNames, staged, crdsMode string, rep *Report) error {
	wasBundled, err := bundlesCRDs(root, k, "")
	if err != nil {
		return err
	}
	bundled, err := bundlesCRDs(root, k, crdsMode)
	if err != nil {
		return err
	}
	if _, err := vendor(staged, filepath.Join(root, filepath.FromSlash(k.Chart))); err != nil {
		return fmt.Errorf("vendor %s: %w", k.Chart, err)
	}
	ch, err := loader.Load(filepath.Join(root, filepath.FromSlash(k.Chart)))
	if err != nil {
		return fmt.Errorf("%s: %w", k.Chart, err)
	}
	needs, err := chartrbac.Discover(ch)
	if err != nil {
		return fmt.Errorf("what %s needs: %w", k.Chart, err)
	}
	rep.Needs = needs
	imgs, err := mapImages(ch, k.Kind)
	if err != nil {
		return fmt.Errorf("images of %s: %w", k.Chart, err)
	}
	rep.Images, rep.Unmapped = imgs.Images, imgs.Unmapped

	var crds []chartCRD
	if bundled {
		if crds, err = readChartCRDs(ch); err != nil {
			return fmt.Errorf("crds/ of %s: %w", k.Chart, err)
		}
		for _, c := range crds {
			rep.BundledCRDs = append(rep.BundledCRDs, c.crd.Name)
		}
	}
	// The watch skips crds/ exactly while they ship with the operator.
	var skipCRDs *bool
	switch {
	case len(crds) > 0:
		skipCRDs = ptrTo(true)
	case wasBundled:
		skipCRDs = ptrTo(false)
	}

	entry := watchEntry{Group: k.Group, Version: k.Version, Kind: k.Kind, Chart: k.Chart}
	if _, err := writeWatch(root, entry, imgs.Overrides, needs.Scope, skipCRDs); err != nil {
		return err
	}
	if err := writeChartCRDs(root, k, ch.Name(), crds); err != nil {
		return err
	}
	if _, err := writeManagerEnv(root, k.Kind, imgs.Images); err != nil {
		return err
	}

	// make manifests: every kind's CRD, as hack/gencrd writes them.
	crd, err := crdgen.CRD(hopwatches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind},
		ChartPath:        k.Chart, Chart: ch,
	})
	if err != nil {
		return err
	}
	if err := syncCRDs(root); err != nil {
		return err
	}
	if _, err := addResource(filepath.Join(root, crdKustomization), "bases/"+crdgen.FileName(crd), crdMarker, nil); err != nil {
		return err
	}

	// The sample is the author's once written: an update keeps it.
	samplePath := filepath.Join(root, k.samplePath())
	if _, err := os.Stat(samplePath); os.IsNotExist(err) {
		if _, err := writeIfChanged(samplePath, sample(k)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else {
		rep.KeptSample = k.samplePath()
	}
	if _, err := addResource(filepath.Join(root, samplesKustomization), k.sampleFile(), samplesMarker, nil); err != nil {
		return err
	}

	for _, f := range []struct {
		path, entry string
		data        []byte
	}{{k.editorRolePath(), k.editorRoleFile(), editorRole(k)}, {k.viewerRolePath(), k.viewerRoleFile(), viewerRole(k)}} {
		if _, err := writeIfChanged(filepath.Join(root, f.path), f.data); err != nil {
			return err
		}
		if _, err := addResource(filepath.Join(root, rbacKustomization), f.entry, "", isKindRole); err != nil {
			return err
		}
	}

	if _, err := writeProject(root, k); err != nil {
		return err
	}

	sampleSpec, err := readSampleSpec(samplePath)
	if err != nil {
		return err
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if _, err := writeCSV(root, ownedInput{
		names: k, description: ch.Metadata.Description, spec: &spec, kinds: needs.Kinds, sampleSpec: sampleSpec,
	}); err != nil {
		return err
	}

	if err := chartrbac.WriteRules(root, chartrbac.CR{Group: k.Group, Version: k.Version, Kind: k.Kind, Plural: k.Plural, Chart: k.Chart, SkipCRDs: len(crds) > 0}, needs); err != nil {
		return fmt.Errorf("RBAC of %s: %w", k.Kind, err)
	}
	notes, err := crdgen.SpecNotes(ch)
	if err != nil {
		return fmt.Errorf("CRD of %s: %w", k.Kind, err)
	}
	rep.SpecNotes = notes
	return nil
}

// syncCRDs regenerates config/crd/bases from the root's watches.yaml, as
// `make manifests` does.
func syncCRDs(root string) error {
	ws, err := loadWatches(root)
	if err != nil {
		return err
	}
	files, err := crdgen.Generate(ws)
	if err != nil {
		return err
	}
	_, err = crdgen.Sync(filepath.Join(root, "config", "crd", "bases"), files, false)
	return err
}

// readSampleSpec returns the spec of the sample at path.
func readSampleSpec(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Spec map[string]any `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return obj.Spec, nil
}

func ptrTo[T any](v T) *T { return &v }
