package crdgen_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Every sample of config/samples is applied to a real kube-apiserver with the
// generated CRDs installed: the server accepts it, prunes none of its fields,
// and every field it defaults (a server-side dry run shows them) has the
// chart's own default, so a sample's release is what its comments promise.
func TestSamplesOnTheAPIServer(t *testing.T) {
	root := testutil.RepoRoot()
	cp, err := testutil.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	c := testutil.Client(t, cp.Config)
	ns := testutil.Namespace(t, c, "samples")
	charts := chartsByKind(t, root)

	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		tested++
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sample := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &sample.Object); err != nil {
				t.Fatal(err)
			}
			chartDir, ok := charts[sample.GetKind()]
			if !ok {
				t.Fatalf("watches.yaml has no entry for kind %s", sample.GetKind())
			}
			chrt, err := loader.Load(filepath.Join(root, chartDir))
			if err != nil {
				t.Fatal(err)
			}
			sample.SetNamespace(ns)
			spec, _, _ := unstructured.NestedMap(sample.Object, "spec")

			dry := sample.DeepCopy()
			if err := c.Create(context.Background(), dry, client.DryRunAll); err != nil {
				t.Fatalf("the API server rejects the sample (dry run): %v", err)
			}
			got, _, _ := unstructured.NestedMap(dry.Object, "spec")
			for _, p := range missing(spec, got, "spec") {
				t.Errorf("the API server pruned %s of the sample", p)
			}
			defaulted := added(got, spec, "spec")
			if len(defaulted) == 0 {
				t.Errorf("the API server defaulted nothing: the CRD sets no defaults for fields the sample leaves out")
			}
			for _, p := range defaulted {
				want, ok := lookup(chrt.Values, strings.TrimPrefix(p, "spec."))
				if !ok {
					t.Errorf("the API server defaulted %s, which the chart's values.yaml does not set", p)
					continue
				}
				gotV, _ := lookup(got, strings.TrimPrefix(p, "spec."))
				if js(gotV) != js(want) {
					t.Errorf("the API server defaulted %s to %s; the chart's default is %s", p, js(gotV), js(want))
				}
			}
			t.Logf("%s: %d fields defaulted by the API server, each the chart's default", sample.GetKind(), len(defaulted))

			if err := c.Create(context.Background(), sample); err != nil {
				t.Fatalf("the API server rejects the sample: %v", err)
			}
		})
	}
	if tested == 0 {
		t.Fatal("no samples in config/samples")
	}
}

// chartsByKind reads watches.yaml's kind → chart directory.
func chartsByKind(t *testing.T, root string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct{ Kind, Chart string }
	if err := yaml.Unmarshal(raw, &entries); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		out[e.Kind] = e.Chart
	}
	return out
}

// added lists the leaf paths of got that want lacks (a map present in both is
// compared field by field), sorted.
func added(got, want map[string]any, prefix string) []string {
	var out []string
	for k, v := range got {
		p := prefix + "." + k
		w, ok := want[k]
		if !ok {
			out = append(out, p)
			continue
		}
		gm, gok := v.(map[string]any)
		wm, wok := w.(map[string]any)
		if gok && wok {
			out = append(out, added(gm, wm, p)...)
		}
	}
	sort.Strings(out)
	return out
}

// missing lists the leaf paths of want that got lacks.
func missing(want, got map[string]any, prefix string) []string {
	return added(want, got, prefix)
}

// lookup reads the dotted path p in m.
func lookup(m map[string]any, p string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
