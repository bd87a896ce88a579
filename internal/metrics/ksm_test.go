package metrics_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// ksmConfig is the part of kube-state-metrics' CustomResourceStateMetrics
// format (k8s.io/kube-state-metrics/v2/pkg/customresourcestate) that
// config/prometheus/kube-state-metrics uses. It is read strictly: a field
// kube-state-metrics would not know, or a misspelt one, fails the test.
type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []ksmResource `json:"resources"`
	} `json:"spec"`
}

type ksmResource struct {
	GroupVersionKind struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"groupVersionKind"`
	ResourcePlural   string              `json:"resourcePlural"`
	MetricNamePrefix *string             `json:"metricNamePrefix"`
	LabelsFromPath   map[string][]string `json:"labelsFromPath"`
	Metrics          []struct {
		Name string `json:"name"`
		Help string `json:"help"`
		Each struct {
			Type string `json:"type"`
			Info *struct {
				Path           []string            `json:"path"`
				LabelsFromPath map[string][]string `json:"labelsFromPath"`
			} `json:"info"`
		} `json:"each"`
		LabelsFromPath map[string][]string `json:"labelsFromPath"`
	} `json:"metrics"`
}

var ksmDir = filepath.Join(tu.RepoRoot(), "config", "prometheus", "kube-state-metrics")

func loadKSMConfig(t *testing.T) ksmConfig {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(ksmDir, "custom-resource-state.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg ksmConfig
	if err := sigsyaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatalf("custom-resource-state.yaml: %v", err)
	}
	if cfg.Kind != "CustomResourceStateMetrics" {
		t.Fatalf("custom-resource-state.yaml: kind %q, want CustomResourceStateMetrics", cfg.Kind)
	}
	return cfg
}

// loadCRDs reads the CRDs of config/crd/bases.
func loadCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(tu.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsyaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	return out
}

// labels returns every label path of the resource's metrics, by label name.
func (r ksmResource) labels() map[string][]string {
	out := map[string][]string{}
	for k, v := range r.LabelsFromPath {
		out[k] = v
	}
	for _, m := range r.Metrics {
		for k, v := range m.LabelsFromPath {
			out[k] = v
		}
		if m.Each.Info != nil {
			for k, v := range m.Each.Info.LabelsFromPath {
				out[k] = slices.Concat(m.Each.Info.Path, v)
			}
		}
	}
	return out
}

// TestKubeStateMetricsConfig checks the kube-state-metrics configuration of
// config/prometheus/kube-state-metrics against the CRDs of config/crd/bases:
// one entry per CRD, of its group, served version, kind and plural; every
// label path leads to a scalar field of the CRD's schema (a condition by a
// type the operator writes); no label comes from a message; the metric
// names do not clash with the operator's own; and the ClusterRole lets
// kube-state-metrics list and watch every kind.
func TestKubeStateMetricsConfig(t *testing.T) {
	cfg, crds := loadKSMConfig(t), loadCRDs(t)
	if len(cfg.Spec.Resources) != len(crds) {
		t.Errorf("%d resources in the config, want one per CRD (%d)", len(cfg.Spec.Resources), len(crds))
	}
	role := readRole(t)
	for _, crd := range crds {
		kind := crd.Spec.Names.Kind
		t.Run(kind, func(t *testing.T) {
			var res *ksmResource
			for i, r := range cfg.Spec.Resources {
				if r.GroupVersionKind.Group == crd.Spec.Group && r.GroupVersionKind.Kind == kind {
					res = &cfg.Spec.Resources[i]
				}
			}
			if res == nil {
				t.Fatalf("no entry for %s.%s", kind, crd.Spec.Group)
			}
			var version *apiextensionsv1.CustomResourceDefinitionVersion
			for i, v := range crd.Spec.Versions {
				if v.Name == res.GroupVersionKind.Version && v.Served {
					version = &crd.Spec.Versions[i]
				}
			}
			if version == nil {
				t.Fatalf("version %q is not a served version of the CRD", res.GroupVersionKind.Version)
			}
			if res.ResourcePlural != crd.Spec.Names.Plural {
				t.Errorf("resourcePlural %q, want the CRD's %q", res.ResourcePlural, crd.Spec.Names.Plural)
			}
			if res.MetricNamePrefix == nil || !strings.HasPrefix(*res.MetricNamePrefix, "helmapp_") {
				t.Errorf("metricNamePrefix %v, want one starting with helmapp_", res.MetricNamePrefix)
			}
			for _, m := range res.Metrics {
				full := *res.MetricNamePrefix + "_" + m.Name
				if slices.Contains([]string{metrics.ResourceInfo, metrics.ReleaseInfo, metrics.ReconcileTotal, metrics.HelmActionDuration}, full) {
					t.Errorf("metric %s clashes with the operator's own", full)
				}
				if !strings.EqualFold(m.Each.Type, "Info") || m.Each.Info == nil {
					t.Errorf("metric %s: type %q, want Info", full, m.Each.Type)
				}
			}
			labels := res.labels()
			for _, want := range []string{"name", "exported_namespace", "ready", "reason", "stalled", "revision", "chart_version"} {
				if _, ok := labels[want]; !ok {
					t.Errorf("no label %s", want)
				}
			}
			schema := version.Schema.OpenAPIV3Schema
			for name, path := range labels {
				if err := checkPath(schema, path); err != nil {
					t.Errorf("label %s %v: %v", name, path, err)
				}
			}
			if !roleAllows(role, crd.Spec.Group, crd.Spec.Names.Plural, "list", "watch") {
				t.Errorf("rbac.yaml does not allow list and watch of %s.%s", crd.Spec.Names.Plural, crd.Spec.Group)
			}
		})
	}
}

var filterSegment = regexp.MustCompile(`^\[([A-Za-z]+)=([A-Za-z]+)\]$`)

// checkPath says what is wrong unless path, in kube-state-metrics' path
// syntax, leads through schema to a scalar: a field name goes to a property,
// "[type=X]" picks the item of a list whose field type is X (X must be a
// condition type the operator writes). metadata.name and metadata.namespace
// are every object's, not in the CRD's schema.
func checkPath(schema *apiextensionsv1.JSONSchemaProps, path []string) error {
	if len(path) == 2 && path[0] == "metadata" && (path[1] == "name" || path[1] == "namespace") {
		return nil
	}
	s := schema
	for i, seg := range path {
		if m := filterSegment.FindStringSubmatch(seg); m != nil {
			if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
				return fmt.Errorf("segment %d %q filters %v, which is not a list", i, seg, path[:i])
			}
			s = s.Items.Schema
			if _, ok := s.Properties[m[1]]; !ok {
				return fmt.Errorf("segment %d %q: the items of %v have no field %s", i, seg, path[:i], m[1])
			}
			if m[1] == "type" && !slices.Contains(status.OwnedConditionTypes, m[2]) {
				return fmt.Errorf("segment %d %q: %s is not a condition type the operator writes", i, seg, m[2])
			}
			continue
		}
		p, ok := s.Properties[seg]
		if !ok {
			return fmt.Errorf("no field %q under %v (fields: %v)", seg, path[:i], keys(s.Properties))
		}
		s = &p
	}
	if last := path[len(path)-1]; last == "message" {
		return fmt.Errorf("a label from a message is unbounded text and may carry what must stay out of metrics")
	}
	if !slices.Contains([]string{"string", "integer", "boolean", "number"}, s.Type) {
		return fmt.Errorf("leads to a %q, not a scalar", s.Type)
	}
	return nil
}

func keys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func readRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(ksmDir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := sigsyaml.UnmarshalStrict(raw, role); err != nil {
		t.Fatalf("rbac.yaml: %v", err)
	}
	return role
}

func roleAllows(role *rbacv1.ClusterRole, group, resource string, verbs ...string) bool {
	for _, verb := range verbs {
		ok := false
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// ksmLabels evaluates the label paths of the config's entry for kind on the
// object u, as kube-state-metrics does for the paths the config uses (field
// names and [type=X] filters of lists): what kube-state-metrics would label
// the resource's series with. An absent field gives an empty value.
func ksmLabels(t *testing.T, kind string, u *unstructured.Unstructured) map[string]string {
	t.Helper()
	cfg := loadKSMConfig(t)
	out := map[string]string{}
	for _, r := range cfg.Spec.Resources {
		if r.GroupVersionKind.Kind != kind {
			continue
		}
		for name, path := range r.labels() {
			out[name] = evaluate(u.Object, path)
		}
	}
	return out
}

func evaluate(obj any, path []string) string {
	cur := obj
	for _, seg := range path {
		if m := filterSegment.FindStringSubmatch(seg); m != nil {
			list, _ := cur.([]any)
			cur = nil
			for _, item := range list {
				if im, ok := item.(map[string]any); ok && fmt.Sprint(im[m[1]]) == m[2] {
					cur = im
				}
			}
			continue
		}
		m, _ := cur.(map[string]any)
		cur = m[seg]
	}
	if cur == nil {
		return ""
	}
	return fmt.Sprint(cur)
}
