package bundle

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"

	"github.com/helmapp/helm-app-operator/internal/tooling/charts"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// relatedImagePrefix starts the names of the manager's environment variables
// that hold an operand's image (operator-sdk's convention; OLM and
// `oc adm catalog mirror` know it).
const relatedImagePrefix = "RELATED_IMAGE_"

// disconnectedAnnotation is the CSV's OpenShift feature annotation saying
// the operator runs on a disconnected cluster: every image it runs or deploys
// is pinned to a digest (so a mirror can serve it) and listed in
// relatedImages.
const disconnectedAnnotation = "features.operators.openshift.io/disconnected"

// watchEntry is the part of a watches.yaml entry the bundle needs.
type watchEntry struct {
	Group          string            `json:"group"`
	Kind           string            `json:"kind"`
	Chart          string            `json:"chart"`
	OverrideValues map[string]string `json:"overrideValues"`
	Scope          *watchScope       `json:"scope"`
}

// watchScope is an entry's scope: what its releases create beyond their
// own namespace (internal/watches.Scope).
type watchScope struct {
	ClusterScoped []watches.ScopeRule `json:"clusterScoped"`
	Namespaces    []watches.ScopeRule `json:"namespaces"`
}

// ReadDigests reads an IMAGE_DIGESTS file: a YAML map from image reference
// (as config/ names it, with its tag) to the digest it is pinned to
// ("sha256:..."). Keys are compared fully qualified, so "nginx:1" and
// "docker.io/library/nginx:1" are the same image.
func ReadDigests(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := sigsyaml.UnmarshalStrict(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: want a map of image to digest: %w", path, err)
	}
	return m, nil
}

// pinner rewrites image references to the digests of a map; with no map it
// only normalizes them.
type pinner struct {
	digests map[string]digest.Digest // by fully qualified image
	used    map[string]bool
	// keepUnpinned: an image the map lacks keeps its tag.
	keepUnpinned bool
}

func newPinner(m map[string]string) (*pinner, error) {
	p := &pinner{digests: map[string]digest.Digest{}, used: map[string]bool{}}
	for image, d := range m {
		full, err := qualify(image)
		if err != nil {
			return nil, fmt.Errorf("image digests: %w", err)
		}
		dg, err := digest.Parse(d)
		if err != nil {
			return nil, fmt.Errorf("image digests: %s: %q is not a digest: %w", image, d, err)
		}
		p.digests[full] = dg
	}
	return p, nil
}

// qualify returns image fully qualified, tagged latest when it has neither
// tag nor digest.
func qualify(image string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return reference.TagNameOnly(ref).String(), nil
}

// pin returns image fully qualified and, when the map has it, as
// name@digest (the tag dropped: a digest names the content, a tag next to it
// would only mislead). With a map, an image it lacks is an error, so that no
// tag is left behind by accident.
func (p *pinner) pin(image string) (string, error) {
	full, err := qualify(image)
	if err != nil {
		return "", err
	}
	ref, _ := reference.ParseNormalizedNamed(full)
	if _, ok := ref.(reference.Digested); ok || len(p.digests) == 0 {
		return full, nil
	}
	d, ok := p.digests[full]
	if !ok && p.keepUnpinned {
		return full, nil
	}
	if !ok {
		return "", fmt.Errorf("image %s has no digest in the image digests", full)
	}
	p.used[full] = true
	pinned, err := reference.WithDigest(reference.TrimNamed(ref), d)
	if err != nil {
		return "", err
	}
	return pinned.String(), nil
}

// unused returns the images of the map nothing referred to (a typo, or an
// image config/ no longer uses).
func (p *pinner) unused() []string {
	var out []string
	for image := range p.digests {
		if !p.used[image] {
			out = append(out, image)
		}
	}
	slices.Sort(out)
	return out
}

// overrideRelatedImages sets the RELATED_IMAGE_* variables of d's
// containers that overrides name (by variable name) and records which it set.
func overrideRelatedImages(d *appsv1.Deployment, overrides map[string]string, set map[string]bool) {
	for _, cs := range [][]corev1.Container{d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Env {
				e := &cs[i].Env[j]
				if v, ok := overrides[e.Name]; ok && strings.HasPrefix(e.Name, relatedImagePrefix) {
					e.Value, e.ValueFrom = v, nil
					set[e.Name] = true
				}
			}
		}
	}
}

// pinDeployment rewrites the images of d's containers and their
// RELATED_IMAGE_* variables with p.
func pinDeployment(d *appsv1.Deployment, p *pinner) error {
	for _, cs := range [][]corev1.Container{d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			var err error
			if c.Image, err = p.pin(c.Image); err != nil {
				return fmt.Errorf("Deployment %s, container %s: %w", d.Name, c.Name, err)
			}
			for j := range c.Env {
				e := &c.Env[j]
				if !strings.HasPrefix(e.Name, relatedImagePrefix) {
					continue
				}
				if e.ValueFrom != nil || e.Value == "" {
					return fmt.Errorf("Deployment %s, container %s: %s must have a literal image value", d.Name, c.Name, e.Name)
				}
				if e.Value, err = p.pin(e.Value); err != nil {
					return fmt.Errorf("Deployment %s, container %s, %s: %w", d.Name, c.Name, e.Name, err)
				}
			}
		}
	}
	return nil
}

// relatedImages lists every image the operator runs or deploys, fully
// qualified, for disconnected mirroring (`oc adm catalog mirror` copies
// them): the containers of the operator's Deployments (named after the
// container), then their RELATED_IMAGE_<NAME> variables (named <name>).
// Duplicates are listed once.
//
// It then renders each chart of watches.yaml with its default values and its
// overrideValues expanded from the manager's environment, as the operator
// installs it, and fails if a pod template runs an image that is not listed:
// such an image could be neither mirrored nor pinned.
func relatedImages(root string, deployments []v1alpha1.StrategyDeploymentSpec) ([]v1alpha1.RelatedImage, error) {
	var out []v1alpha1.RelatedImage
	seen := map[string]bool{}
	add := func(name, image string) error {
		full, err := qualify(image)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !seen[full] {
			seen[full] = true
			out = append(out, v1alpha1.RelatedImage{Name: name, Image: full})
		}
		return nil
	}
	env := map[string]string{}
	for _, d := range deployments {
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			if err := add(c.Name, c.Image); err != nil {
				return nil, err
			}
		}
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			for _, e := range c.Env {
				if name, ok := strings.CutPrefix(e.Name, relatedImagePrefix); ok {
					if err := add(strings.ToLower(strings.ReplaceAll(name, "_", "-")), e.Value); err != nil {
						return nil, err
					}
				}
				if e.ValueFrom == nil {
					env[e.Name] = e.Value
				}
			}
		}
	}

	entries, err := readWatches(root)
	if err != nil {
		return nil, err
	}
	for _, w := range entries {
		images, err := chartImages(filepath.Join(root, w.Chart), w.OverrideValues, env)
		if err != nil {
			return nil, fmt.Errorf("images of the chart of %s: %w", w.Kind, err)
		}
		for _, im := range images {
			full, err := qualify(im.image)
			if err != nil {
				return nil, fmt.Errorf("chart %s, container %s: %w", w.Chart, im.container, err)
			}
			if !seen[full] {
				return nil, fmt.Errorf("chart %s (%s) runs image %s in container %s, which is not the value of a %s* variable of the manager: "+
					"set the image from one with overrideValues in watches.yaml, so that it can be mirrored and pinned", w.Chart, w.Kind, full, im.container, relatedImagePrefix)
			}
		}
	}
	return out, nil
}

// readWatches reads the watches.yaml under root.
func readWatches(root string) ([]watchEntry, error) {
	raw, err := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if err != nil {
		return nil, err
	}
	var entries []watchEntry
	if err := sigsyaml.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("watches.yaml: %w", err)
	}
	return entries, nil
}

// allDigests says whether every related image is pinned to a digest.
func allDigests(images []v1alpha1.RelatedImage) bool {
	for _, im := range images {
		ref, err := reference.ParseNormalizedNamed(im.Image)
		if err != nil {
			return false
		}
		if _, ok := ref.(reference.Digested); !ok {
			return false
		}
	}
	return len(images) > 0
}

type containerImage struct{ container, image string }

// chartImages renders the chart at dir with its default values and the
// override values (expanded from env, as the operator expands them from its
// environment) and returns the images of the pod templates of its
// Deployments, StatefulSets, DaemonSets and Jobs.
func chartImages(dir string, overrides, env map[string]string) ([]containerImage, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	vals := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		v, err := watches.ExpandOverride(k, overrides[k], func(name string) string { return env[name] })
		if err != nil {
			return nil, fmt.Errorf("override value %s: %w", k, err)
		}
		if err := strvals.ParseInto(k+"="+v, vals); err != nil {
			return nil, fmt.Errorf("override value %s: %w", k, err)
		}
	}
	r, err := charts.RenderChart(ch, "related-images", "default", vals)
	if err != nil {
		return nil, err
	}
	var out []containerImage
	for _, m := range r.Manifests {
		objs, err := decodeObjects([]byte(m))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			spec, err := podSpec(o)
			if err != nil {
				return nil, err
			}
			if spec == nil {
				continue
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				out = append(out, containerImage{container: c.Name, image: c.Image})
			}
		}
	}
	return out, nil
}

// podSpec returns the pod template's spec of a workload object, or nil for
// other kinds.
func podSpec(o *unstructured.Unstructured) (*corev1.PodSpec, error) {
	switch o.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps", "StatefulSet.apps", "DaemonSet.apps", "Job.batch":
	default:
		return nil, nil
	}
	// The workload kinds share spec.template; decode through Deployment.
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
		return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return &d.Spec.Template.Spec, nil
}
