package chartkit

import (
	"bytes"
	"strings"
	"testing"

	"github.com/helmapp/helm-app-operator/internal/tooling/chartrbac"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// TestReportSaysWhatToCheck: the report names what the command wrote, every
// image it could not map, every kind it could not resolve, the notes of the
// RBAC discovery and of the CRD, whether the kind needs the AllNamespaces
// install mode, and the next commands.
func TestReportSaysWhatToCheck(t *testing.T) {
	rep := &Report{
		Names:        kindNames{Group: "shop.helmapp.io", Version: "v1alpha1", Kind: "Shop", Chart: "helm-charts/shop"},
		Source:       "oci://example.com/charts/shop:1.0.0",
		ChartVersion: "1.0.0",
		Changed:      []string{"wrote watches.yaml", "vendored helm-charts/shop/"},
		Images:       []relatedImage{{"RELATED_IMAGE_SHOP", "example.com/shop:1.0.0"}},
		Unmapped:     []string{"value worker.image: no container runs an image set here with the default values"},
		Needs: &chartrbac.Needs{
			Unresolved: []string{"templates/psp.yaml: PodSecurityPolicy policy/v1beta1"},
			Notes:      []string{"ClusterRole shop grants a wildcard"},
			Scope: watches.Scope{ClusterScoped: []watches.ScopeRule{
				{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Names: []string{"shop-manager", "{{release}}-{{namespace}}"}},
			}},
		},
		SpecNotes: []string{".config: anyOf degraded to any value"},
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, want := range []string{
		"Kind Shop (shop.helmapp.io/v1alpha1) serves the chart helm-charts/shop 1.0.0 from oci://example.com/charts/shop:1.0.0.",
		"wrote watches.yaml", "vendored helm-charts/shop/",
		"RELATED_IMAGE_SHOP=example.com/shop:1.0.0",
		"value worker.image: no container runs",
		"kind not resolved to a resource (no RBAC rule written for it): templates/psp.yaml",
		"ClusterRole shop grants a wildcard",
		"Install modes: AllNamespaces only: its releases create objects outside their namespace whose names hold no {{namespace}} (ClusterRole shop-manager)",
		"CRD: .config: anyOf degraded",
		"make manifests bundle", "make demo",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportInstallModes: a kind whose releases make nothing shared outside
// their namespace leaves every install mode, and says why.
func TestReportInstallModes(t *testing.T) {
	for _, tc := range []struct {
		needs *chartrbac.Needs
		want  string
	}{
		{&chartrbac.Needs{}, "Install modes: all; the chart creates objects in its release's namespace only"},
		{&chartrbac.Needs{Kinds: []chartrbac.Kind{{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass", Resource: "storageclasses"}},
			Scope: watches.Scope{ClusterScoped: []watches.ScopeRule{{Group: "storage.k8s.io", Kind: "StorageClass", Names: []string{"{{namespace}}-{{release}}"}}}}},
			"Install modes: all; the chart creates cluster-scoped objects (StorageClass), so the operator holds cluster-wide rules in every mode"},
	} {
		var out bytes.Buffer
		(&Report{Needs: tc.needs}).Print(&out)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("the report lacks %q:\n%s", tc.want, out.String())
		}
	}
}
