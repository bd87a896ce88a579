package bundle

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/distribution/reference"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"

	"github.com/helmapp/helm-app-operator/internal/charts"
)

// watchEntry is the part of a watches.yaml entry the bundle needs.
type watchEntry struct {
	Kind  string `json:"kind"`
	Chart string `json:"chart"`
}

// relatedImages lists every image the operator runs or deploys, fully
// qualified, for disconnected mirroring (`oc adm catalog mirror` copies
// them): the containers of the operator's Deployments (named after the
// container), then the images of each chart of watches.yaml rendered with its
// default values (named after the chart, or chart-container when a chart runs
// several images). Duplicates are listed once.
func relatedImages(root string, deployments []v1alpha1.StrategyDeploymentSpec) ([]v1alpha1.RelatedImage, error) {
	var out []v1alpha1.RelatedImage
	seen := map[string]bool{}
	add := func(name, image string) error {
		ref, err := reference.ParseNormalizedNamed(image)
		if err != nil {
			return fmt.Errorf("image %q of %s: %w", image, name, err)
		}
		full := reference.TagNameOnly(ref).String()
		if !seen[full] {
			seen[full] = true
			out = append(out, v1alpha1.RelatedImage{Name: name, Image: full})
		}
		return nil
	}
	for _, d := range deployments {
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			if err := add(c.Name, c.Image); err != nil {
				return nil, err
			}
		}
	}

	raw, err := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if err != nil {
		return nil, err
	}
	var entries []watchEntry
	if err := sigsyaml.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("watches.yaml: %w", err)
	}
	for _, w := range entries {
		images, err := chartImages(filepath.Join(root, w.Chart))
		if err != nil {
			return nil, fmt.Errorf("images of the chart of %s: %w", w.Kind, err)
		}
		for _, im := range images {
			name := filepath.Base(w.Chart)
			if len(images) > 1 {
				name += "-" + im.container
			}
			if err := add(name, im.image); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

type containerImage struct{ container, image string }

// chartImages renders the chart at dir with its default values and returns
// the images of the pod templates of its Deployments, StatefulSets,
// DaemonSets and Jobs.
func chartImages(dir string) ([]containerImage, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	r, err := charts.RenderChart(ch, "related-images", "default", nil)
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
