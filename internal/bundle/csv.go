package bundle

import (
	"encoding/json"
	"fmt"
	"slices"
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
// relatedImages. Everything else of the base is kept as written.
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
	csv.Annotations["containerImage"] = in.opts.Image
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

	var specs []v1alpha1.StrategyDeploymentSpec
	for _, u := range in.deployments {
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", u.GetName(), err)
		}
		if err := checkWatchNamespace(&d, csv.Spec.InstallModes); err != nil {
			return nil, err
		}
		specs = append(specs, v1alpha1.StrategyDeploymentSpec{Name: d.Name, Label: d.Labels, Spec: d.Spec})
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
	return csv, nil
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
