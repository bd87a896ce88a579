package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/tooling/charts"
)

// TestPodTemplatesAreRestricted checks every pod template the operator runs
// or deploys with the API server's own Pod Security evaluator
// (k8s.io/pod-security-admission, level restricted, latest version): the
// manager's Deployment as config/ renders it, and the workloads of every
// chart of watches.yaml rendered with its default values and with the values
// of its config/samples resource (the console's default sample).
func TestPodTemplatesAreRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	check := func(t *testing.T, what string, objs []*unstructured.Unstructured) {
		t.Helper()
		pods := 0
		for _, o := range objs {
			spec, err := podSpec(o)
			if err != nil {
				t.Fatal(err)
			}
			if spec == nil {
				continue
			}
			pods++
			meta := podMeta(o)
			res := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &meta, spec))
			if !res.Allowed {
				t.Errorf("%s: %s %s violates Pod Security restricted: %s", what, o.GetKind(), o.GetName(), res.ForbiddenReason())
			}
			// No fixed UID: OpenShift's restricted-v2 SCC assigns one from
			// the namespace's range and refuses a UID outside it.
			if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
				t.Errorf("%s: %s %s fixes the pod's runAsUser", what, o.GetKind(), o.GetName())
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
					t.Errorf("%s: %s %s fixes container %s's runAsUser", what, o.GetKind(), o.GetName(), c.Name)
				}
			}
		}
		if pods == 0 {
			t.Errorf("%s: no pod template found", what)
		}
	}

	t.Run("manager", func(t *testing.T) {
		objs, err := buildManifests(repoRoot, "quay.io/helmapp/helm-app-operator:0.1.0", "")
		if err != nil {
			t.Fatal(err)
		}
		var deployments []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Deployment" {
				deployments = append(deployments, o)
			}
		}
		check(t, "config/", deployments)
	})

	samples := sampleSpecs(t)
	for _, w := range watchEntries(t) {
		dir := filepath.Join(repoRoot, w.Chart)
		for _, tc := range []struct {
			name   string
			values map[string]any
		}{{"defaults", nil}, {"sample", samples[w.Kind]}} {
			t.Run(w.Kind+"/"+tc.name, func(t *testing.T) {
				if tc.name == "sample" && tc.values == nil {
					t.Fatalf("config/samples has no %s", w.Kind)
				}
				r, err := charts.Render(dir, "psa", "default", tc.values)
				if err != nil {
					t.Fatal(err)
				}
				var objs []*unstructured.Unstructured
				for _, m := range r.Manifests {
					os, err := decodeObjects([]byte(m))
					if err != nil {
						t.Fatal(err)
					}
					objs = append(objs, os...)
				}
				check(t, fmt.Sprintf("chart %s with %s values", w.Chart, tc.name), objs)
			})
		}
	}
}

// podMeta returns the pod template's metadata of a workload.
func podMeta(o *unstructured.Unstructured) metav1.ObjectMeta {
	m, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata")
	var meta metav1.ObjectMeta
	if b, err := sigsyaml.Marshal(m); err == nil {
		_ = sigsyaml.Unmarshal(b, &meta)
	}
	return meta
}

// watchEntries reads watches.yaml.
func watchEntries(t *testing.T) []watchEntry {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ws []watchEntry
	if err := sigsyaml.Unmarshal(raw, &ws); err != nil {
		t.Fatal(err)
	}
	if len(ws) == 0 {
		t.Fatal("watches.yaml has no entries")
	}
	return ws
}

// sampleSpecs returns the spec of each config/samples resource by kind.
func sampleSpecs(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		if strings.HasSuffix(f, "kustomization.yaml") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			spec, _, _ := unstructured.NestedMap(o.Object, "spec")
			out[o.GetKind()] = spec
		}
	}
	return out
}
