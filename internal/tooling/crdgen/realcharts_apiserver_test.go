package crdgen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestRealChartsOnTheAPIServer installs the generated CRD of each real chart
// (three typed from values.yaml, one from its values.schema.json) in a real
// kube-apiserver (with that of paritySchema, whose every document Helm
// accepts it must admit), creates a resource whose spec is the chart's whole
// values.yaml (the server must accept it and prune nothing), and runs the
// control plane's kubectl explain <plural>.spec, which must list every
// top-level value of the chart with its type.
func TestRealChartsOnTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	type generated struct {
		r      realChart
		values map[string]any
		gvk    schema.GroupVersionKind
		plural string
		types  map[string]string // top-level value -> the type kubectl explain shows
	}
	var gens []generated
	for _, r := range realCharts {
		w := r.watch(t)
		crd, err := CRD(w)
		if err != nil {
			t.Fatal(err)
		}
		data, err := Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName(crd)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		types := map[string]string{}
		for k := range w.Chart.Values {
			types[k] = explainType(spec.Properties[k])
		}
		gens = append(gens, generated{r: r, values: w.Chart.Values, plural: crd.Spec.Names.Plural, types: types,
			gvk: schema.GroupVersionKind{Group: crd.Spec.Group, Version: "v1alpha1", Kind: r.kind}})
	}

	// And a chart whose schema uses what a CRD cannot say as such.
	parity := watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "parity.helmapp.io", Version: "v1alpha1", Kind: "Parity"},
		Chart:            &chart.Chart{Metadata: &chart.Metadata{Name: "parity", Version: "1.0.0"}, Schema: []byte(paritySchema)},
	}
	parityCRD, err := CRD(parity)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(parityCRD)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName(parityCRD)), data, 0o644); err != nil {
		t.Fatal(err)
	}

	cp, err := testutil.StartAPIServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	c := testutil.Client(t, cp.Config)
	ns := testutil.Namespace(t, c, "realcharts")

	t.Run("DegradedSchema", func(t *testing.T) {
		// Every values document Helm's check accepts is admitted by the real
		// API server, nothing pruned but nulls.
		for i, doc := range parityValues {
			values := fromYAML(t, doc)
			if chartutil.ValidateAgainstSingleSchema(values, []byte(paritySchema)) != nil {
				continue
			}
			spec := jsonCopy(t, values)
			name := fmt.Sprintf("doc-%d", i)
			if err := c.Create(context.Background(), testutil.NewCR(parity.GroupVersionKind, ns, name, spec)); err != nil {
				t.Errorf("%s: Helm accepts it, the API server does not: %v", doc, err)
				continue
			}
			got, err := testutil.Get(t, c, parity.GroupVersionKind, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			stored, _, _ := unstructured.NestedMap(got.Object, "spec")
			for _, p := range prunedPaths(spec, stored, "spec") {
				t.Errorf("%s: the API server pruned %s", doc, p)
			}
		}
	})

	for _, g := range gens {
		t.Run(g.r.kind, func(t *testing.T) {
			spec := jsonCopy(t, g.values)
			cr := testutil.NewCR(g.gvk, ns, "defaults", spec)
			if err := c.Create(context.Background(), cr); err != nil {
				t.Fatalf("the API server rejects the chart's own values.yaml as spec: %v", err)
			}
			got, err := testutil.Get(t, c, g.gvk, ns, "defaults")
			if err != nil {
				t.Fatal(err)
			}
			stored, _, _ := unstructured.NestedMap(got.Object, "spec")
			for _, p := range prunedPaths(spec, stored, "spec") {
				t.Errorf("the API server pruned %s of the chart's defaults", p)
			}

			var out string
			testutil.Eventually(t, 2*time.Minute, "kubectl explain to list "+g.plural+".spec's fields", func() (bool, string) {
				out, err = cp.Kubectl(context.Background(), "explain", g.plural+".spec", "--api-version="+g.gvk.GroupVersion().String())
				if err != nil {
					return false, err.Error()
				}
				return strings.Contains(out, "FIELDS:"), out
			})
			listed := explainFields(out)
			for k, want := range g.types {
				if got, ok := listed[k]; !ok {
					t.Errorf("kubectl explain %s.spec does not list %s", g.plural, k)
				} else if got != want {
					t.Errorf("kubectl explain %s.spec lists %s as %s, want %s", g.plural, k, got, want)
				}
			}
			t.Logf("kubectl explain %s.spec lists %d fields, each with its type:\n%s", g.plural, len(listed), clip(out, 1500))
		})
	}
}

// explainType is how kubectl explain shows a field of schema p.
func explainType(p apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "IntOrString"
	case p.Type == "object":
		return "Object"
	case p.Type == "array":
		return "[]" + explainType(*p.Items.Schema)
	case p.Type == "":
		// kubectl shows a field of any type, as it shows a free-form object.
		return "Object"
	}
	return p.Type
}

var explainField = regexp.MustCompile(`(?m)^  (\S+)\t<([^>]*)>`)

// explainFields reads the FIELDS section of kubectl explain: name -> type.
func explainFields(out string) map[string]string {
	fields := map[string]string{}
	if i := strings.Index(out, "FIELDS:"); i >= 0 {
		for _, m := range explainField.FindAllStringSubmatch(out[i:], -1) {
			fields[m[1]] = m[2]
		}
	}
	return fields
}

// prunedPaths lists the paths of want that got lacks, leaving out nulls,
// which the API server drops from a field that is not nullable: Helm reads
// a missing value and a null alike there, as the chart's default.
func prunedPaths(want, got map[string]any, prefix string) []string {
	var out []string
	for k, v := range want {
		if v == nil {
			continue
		}
		p := prefix + "." + k
		g, ok := got[k]
		if !ok {
			out = append(out, p)
			continue
		}
		if wm, ok := v.(map[string]any); ok {
			gm, _ := g.(map[string]any)
			out = append(out, prunedPaths(wm, gm, p)...)
		}
	}
	return out
}
