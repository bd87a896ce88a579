package bundle

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// targetNamespacesPath is where OLM puts the OperatorGroup's target
// namespaces on the operator's pod ("" for all namespaces).
const targetNamespacesPath = "metadata.annotations['olm.targetNamespaces']"

// skipRangeAnnotation is OLM's annotation for the versions a CSV upgrades
// directly (skipping the versions between).
const skipRangeAnnotation = "olm.skipRange"

// watchNamespaceEnv is the variable the operator reads its namespaces from.
const watchNamespaceEnv = "WATCH_NAMESPACE"

// csvInput is what the CSV is assembled from.
type csvInput struct {
	base        *v1alpha1.ClusterServiceVersion
	pkg         string
	opts        Options
	deployments []*unstructured.Unstructured
	rbac        rbacSplit
	examples    []*unstructured.Unstructured
}

// decodeCSV reads the base CSV of config/manifests.
func decodeCSV(u *unstructured.Unstructured) (*v1alpha1.ClusterServiceVersion, error) {
	js, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := json.Unmarshal(js, csv); err != nil {
		return nil, fmt.Errorf("the base ClusterServiceVersion: %w", err)
	}
	return csv, nil
}

// assembleCSV fills in the generated parts of the base CSV, as operator-sdk's
// `generate bundle` does: name and version, containerImage and createdAt,
// alm-examples, the deployment install strategy with its permissions, and
// relatedImages; the install modes are narrowed to AllNamespaces when the
// kinds' releases create objects every install would share (installModes).
// Everything else of the base is kept as written.
func assembleCSV(in csvInput, related func([]v1alpha1.StrategyDeploymentSpec) ([]v1alpha1.RelatedImage, error)) (*v1alpha1.ClusterServiceVersion, error) {
	v, err := semver.Parse(in.opts.Version)
	if err != nil {
		return nil, fmt.Errorf("version %q is not a semantic version: %w", in.opts.Version, err)
	}
	csv := in.base.DeepCopy()
	csv.Name = in.pkg + ".v" + v.String()
	csv.Namespace = "placeholder"
	csv.Spec.Version = version.OperatorVersion{Version: v}
	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	pins, err := newPinner(in.opts.ImageDigests)
	if err != nil {
		return nil, err
	}
	pins.keepUnpinned = in.opts.KeepUnpinned
	if csv.Annotations["containerImage"], err = pins.pin(in.opts.Image); err != nil {
		return nil, fmt.Errorf("the manager's image: %w", err)
	}
	if err := setUpgradeEdges(csv, in.pkg, v, in.opts); err != nil {
		return nil, err
	}
	csv.Annotations["createdAt"] = in.opts.CreatedAt.UTC().Format(time.RFC3339)

	examples := make([]map[string]any, 0, len(in.examples))
	for _, e := range in.examples {
		examples = append(examples, e.Object)
	}
	alm, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return nil, err
	}
	csv.Annotations["alm-examples"] = string(alm)

	if csv.Spec.InstallModes, err = installModes(in.opts.Root, csv.Spec.InstallModes); err != nil {
		return nil, err
	}
	var specs []v1alpha1.StrategyDeploymentSpec
	overridden := map[string]bool{}
	for _, u := range in.deployments {
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", u.GetName(), err)
		}
		if err := checkWatchNamespace(&d, csv.Spec.InstallModes); err != nil {
			return nil, err
		}
		overrideRelatedImages(&d, in.opts.RelatedImages, overridden)
		if err := pinDeployment(&d, pins); err != nil {
			return nil, err
		}
		specs = append(specs, v1alpha1.StrategyDeploymentSpec{Name: d.Name, Label: d.Labels, Spec: d.Spec})
	}
	for _, name := range slices.Sorted(maps.Keys(in.opts.RelatedImages)) {
		if !overridden[name] {
			return nil, fmt.Errorf("%s is not a variable of the manager's Deployment: only the %s* variables config/manager sets can be overridden", name, relatedImagePrefix)
		}
	}
	csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{
		StrategyName: v1alpha1.InstallStrategyNameDeployment,
		StrategySpec: v1alpha1.StrategyDetailsDeployment{
			DeploymentSpecs:    specs,
			Permissions:        in.rbac.Permissions,
			ClusterPermissions: in.rbac.ClusterPermissions,
		},
	}
	if csv.Spec.RelatedImages, err = related(specs); err != nil {
		return nil, err
	}
	if unused := pins.unused(); len(unused) > 0 {
		return nil, fmt.Errorf("the image digests name images the bundle does not use: %s", strings.Join(unused, ", "))
	}
	// OpenShift's disconnected feature: true only when a mirror can serve
	// every image, that is when each one is pinned to a digest.
	csv.Annotations[disconnectedAnnotation] = strconv.FormatBool(allDigests(csv.Spec.RelatedImages))
	return csv, nil
}

// setUpgradeEdges sets the CSV's place in the upgrade graph: spec.replaces
// (the CSV this one upgrades, <package>.v<version> of a lower version) and
// the olm.skipRange annotation (a semver range of versions this one upgrades
// directly; it must not include this version).
func setUpgradeEdges(csv *v1alpha1.ClusterServiceVersion, pkg string, v semver.Version, opts Options) error {
	if opts.Replaces != "" {
		rv, ok := strings.CutPrefix(opts.Replaces, pkg+".v")
		if !ok {
			return fmt.Errorf("replaces %q is not %s.v<version>", opts.Replaces, pkg)
		}
		prev, err := semver.Parse(rv)
		if err != nil {
			return fmt.Errorf("replaces %q: %w", opts.Replaces, err)
		}
		if !prev.LT(v) {
			return fmt.Errorf("replaces %q: an upgrade must replace a lower version than %s", opts.Replaces, v)
		}
		csv.Spec.Replaces = opts.Replaces
	}
	if opts.SkipRange != "" {
		r, err := semver.ParseRange(opts.SkipRange)
		if err != nil {
			return fmt.Errorf("skip range %q: %w", opts.SkipRange, err)
		}
		if r(v) {
			return fmt.Errorf("skip range %q includes this version %s", opts.SkipRange, v)
		}
		csv.Annotations[skipRangeAnnotation] = opts.SkipRange
	}
	return nil
}

// checkWatchNamespace checks that a Deployment of an operator that supports
// more than AllNamespaces reads its namespaces from OLM: every container
// has WATCH_NAMESPACE from the olm.targetNamespaces annotation.
func checkWatchNamespace(d *appsv1.Deployment, modes []v1alpha1.InstallMode) error {
	namespaced := slices.ContainsFunc(modes, func(m v1alpha1.InstallMode) bool {
		return m.Supported && m.Type != v1alpha1.InstallModeTypeAllNamespaces
	})
	if !namespaced {
		return nil
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		ok := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == watchNamespaceEnv && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == targetNamespacesPath
		})
		if !ok {
			return fmt.Errorf("Deployment %s, container %s: the CSV supports namespaced install modes, so the container needs env %s from fieldRef %s",
				d.Name, c.Name, watchNamespaceEnv, targetNamespacesPath)
		}
	}
	return nil
}
