package operator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// An Ingress without an address (no ingress controller writes one here) is
// a warning by default (issue 40): the resource is Ready, the Ingress is
// listed in status.resources.warnings and named in the message, and not
// counted; the address written, the warning goes (the Ingress' change
// wakes the resource). With the watch's requireAddresses the same Ingress
// keeps it from being Ready (NoAddress).
func TestIngressWithoutAddressIsAWarningUnlessRequired(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "addresses")
	stop := operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns})

	spec := map[string]any{"replicaCount": int64(1), "ingress": map[string]any{"enabled": true}}
	if err := c.Create(ctx, tu.NewCR(tu.NginxGVK, ns, "web", spec)); err != nil {
		t.Fatal(err)
	}
	u := tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	rr := tu.Condition(u, status.TypeResourcesReady)
	if want := "; 1 warning: Ingress web: no load-balancer address yet"; rr == nil || !strings.HasSuffix(rr.Message, want) {
		t.Errorf("ResourcesReady = %+v; want its message to end with %q", rr, want)
	}
	warnings, _, _ := unstructured.NestedSlice(u.Object, "status", "resources", "warnings")
	total, _, _ := unstructured.NestedInt64(u.Object, "status", "resources", "total")
	if len(warnings) != 1 || warnings[0].(map[string]any)["kind"] != "Ingress" || warnings[0].(map[string]any)["message"] != "no load-balancer address yet" {
		t.Errorf("status.resources.warnings = %v; want the Ingress", warnings)
	}
	// ServiceAccount, ConfigMap, Service, Deployment; not the Ingress.
	if want := fmt.Sprintf("All %d resources are Current; 1 warning", total); total != 4 || !strings.HasPrefix(rr.Message, want) {
		t.Errorf("ResourcesReady %q, total %d; want 4 counted, the Ingress not", rr.Message, total)
	}

	ing := &networkingv1.Ingress{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, ing); err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.20"}}
	if err := c.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 2*time.Minute, "the warning gone once the Ingress has an address", func() (bool, string) {
		u, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
		if err != nil {
			return false, err.Error()
		}
		warnings, _, _ := unstructured.NestedSlice(u.Object, "status", "resources", "warnings")
		rr := tu.Condition(u, status.TypeResourcesReady)
		return len(warnings) == 0 && rr != nil && rr.Status == metav1.ConditionTrue && !strings.Contains(rr.Message, "warning"), tu.Describe(u)
	})
	stop()

	// requireAddresses: a second resource's Ingress has none.
	b, err := os.ReadFile(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	required := strings.Replace(string(b), "  kind: Nginx\n", "  kind: Nginx\n  requireAddresses: true\n", 1)
	operatortest.Start(t, cfg, tu.WatchesFile(t, required), []string{ns})
	if err := c.Create(ctx, tu.NewCR(tu.NginxGVK, ns, "strict", spec)); err != nil {
		t.Fatal(err)
	}
	u = tu.WaitForCondition(t, c, tu.NginxGVK, ns, "strict", status.TypeResourcesReady, metav1.ConditionFalse, status.ReasonNoAddress)
	if rr := tu.Condition(u, status.TypeReady); rr.Status != metav1.ConditionFalse || rr.Reason != status.ReasonNoAddress ||
		!strings.Contains(rr.Message, "Ingress strict: no load-balancer address yet") {
		t.Errorf("Ready with requireAddresses = %+v; want False NoAddress naming the Ingress", rr)
	}
}
