package crdgen

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
)

// realChart is a chart no one here wrote, from a module at a pinned
// version: the Go module cache holds it once per machine (go mod download
// fetches it through the module proxy the first time). Read-only.
type realChart struct {
	kind, module, dir string
	hasSchema         bool
}

var realCharts = []realChart{
	{"SealedSecretsController", "github.com/bitnami-labs/sealed-secrets@v0.32.2", "helm/sealed-secrets", false},
	{"Gatekeeper", "github.com/open-policy-agent/gatekeeper/v3@v3.20.1", "charts/gatekeeper", false},
	{"SecretsStoreCSIDriver", "sigs.k8s.io/secrets-store-csi-driver@v1.5.4", "charts/secrets-store-csi-driver", false},
	// The three charts of the issue have no values.schema.json; cert-manager's
	// is large, generated, and all $refs.
	{"CertManager", "github.com/cert-manager/cert-manager@v1.21.0", "deploy/charts/cert-manager", true},
}

// load returns the chart's directory and the chart.
func (r realChart) load(t testing.TB) (string, *chart.Chart) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", r.module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", r.module, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", r.module, err, mod.Error)
	}
	dir := filepath.Join(mod.Dir, r.dir)
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, ch
}

func (r realChart) watch(t testing.TB) watches.Watch {
	dir, ch := r.load(t)
	return watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: strings.ToLower(r.kind) + ".helmapp.io", Version: "v1alpha1", Kind: r.kind},
		ChartPath:        dir,
		Chart:            ch,
	}
}

// TestRealChartsSpec converts the spec of each real chart: the apiserver's
// validation accepts the CRD, the chart's whole values.yaml is admitted as a
// spec with nothing pruned, every top-level value is a property, and each
// degraded value is noted.
func TestRealChartsSpec(t *testing.T) {
	for _, r := range realCharts {
		t.Run(r.kind, func(t *testing.T) {
			w := r.watch(t)
			if got := len(w.Chart.Schema) > 0; got != r.hasSchema {
				t.Fatalf("values.schema.json present = %v, want %v", got, r.hasSchema)
			}
			crd, err := CRD(w)
			if err != nil {
				t.Fatal(err)
			}
			if errs := validateCRD(t, crd); len(errs) > 0 {
				t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
			}
			notes, err := SpecNotes(w.Chart)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range notes {
				t.Logf("note: %s", n)
				if !strings.HasPrefix(n, "values") {
					t.Errorf("note %q does not name a value's path", n)
				}
			}
			spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			for k := range w.Chart.Values {
				p, ok := spec.Properties[k]
				if !ok {
					t.Errorf("values.%s is not a property of spec", k)
					continue
				}
				t.Logf("%s: %s %s", k, typeName(p), p.Description)
			}
			obj := map[string]any{
				"apiVersion": crd.Spec.Group + "/v1alpha1", "kind": r.kind,
				"metadata": map[string]any{"name": "x", "namespace": "default"},
				"spec":     jsonCopy(t, w.Chart.Values),
			}
			unknown, errs := admit(t, crd, obj)
			if len(errs) > 0 || len(unknown) > 0 {
				t.Errorf("the chart's own values.yaml as spec: errors %v, pruned %v", errs.ToAggregate(), unknown)
			}
		})
	}
}

func typeName(p apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "int-or-string"
	case p.Type == "":
		return "any"
	}
	return p.Type
}

func jsonCopy(t testing.TB, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
