//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWebhookWithoutEndpointsIsNotReady (issue 40): a release whose chart
// (testdata/charts/webhook, kind Hooked) has a failurePolicy Fail
// validating webhook served by its own Deployment through its Service. At
// replicas 0 the Service has no ready endpoint, so the webhook would refuse
// every write it matches: the release is Deployed but not Ready, and the
// message names the webhook and its Service.
//
// A ready endpoint reaches the status through the Service's EndpointSlice
// alone: a pod made by hand that the Service selects (and no object of the
// release changes) makes the resource Ready, and its deletion not Ready
// again, each time woken by the slice's change (the watch's reconcilePeriod
// is an hour: no reconcile is due otherwise). Then a spec change that scales the backend to 1 makes it
// Ready: kwok makes the pod Ready, and kube-controller-manager lists it in
// the Service's EndpointSlice.
func TestWebhookWithoutEndpointsIsNotReady(t *testing.T) {
	// No periodic reconcile within the test: only a slice's change can
	// wake the resource when no object of the release changes.
	e := newEnv(t, "webhook", watchOptions{hooked: true, hookedChart: "webhook", hookedReconcilePeriod: "1h", hookedScope: map[string]any{
		"clusterScoped": []any{map[string]any{"group": "admissionregistration.k8s.io", "kind": "ValidatingWebhookConfiguration",
			"names": []any{"{{namespace}}-{{release}}"}}},
	}})
	config := "validatingwebhookconfiguration/" + e.ns + "-wh"
	t.Cleanup(func() {
		// Whatever the outcome, the webhook does not outlive the test.
		_, _ = e.tryKubectl("delete", "--ignore-not-found", config)
	})

	start := time.Now()
	e.applyHooked("wh", "  replicas: 0\n")
	hook := "webhook check.wh." + e.ns + ".test.helmapp.io: Service " + e.ns + "/wh-webhook has no ready endpoint"
	notReady := func(n *nginx) bool {
		ready := n.cond(typeReady)
		return n.is("Deployed", metav1.ConditionTrue) && n.is(typeReady, metav1.ConditionFalse) &&
			ready.Reason == "NoReadyEndpoints" && strings.Contains(ready.Message, hook)
	}
	n := e.waitHooked("wh", "Deployed=True, Ready=False NoReadyEndpoints naming the webhook and its Service", notReady)
	t.Logf("Ready=False NoReadyEndpoints %s after the resource's creation:\n%s", time.Since(start).Round(100*time.Millisecond), n)
	listed := false
	for _, o := range n.Status.Resources.NotReady {
		listed = listed || (o.Kind == "ValidatingWebhookConfiguration" && o.Name == e.ns+"-wh")
	}
	if !listed {
		t.Errorf("status.resources.notReady does not list the webhook configuration:\n%s", n)
	}
	out, err := e.tryKubectl("describe", "hooked", "wh")
	t.Logf("kubectl describe hooked wh (err %v):\n%s", err, out)

	// Only the Service's slice changes.
	start = time.Now()
	e.apply("byhand", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: byhand\n  labels:\n    app: wh-backend\n"+
		"spec:\n  containers:\n  - name: webhook\n    image: registry.example.com/webhook:1.0\n")
	n = e.waitHooked("wh", "Ready=True at generation 1 once a pod the Service selects is ready", func(n *nginx) bool {
		return n.Metadata.Generation == 1 && n.is(typeReady, metav1.ConditionTrue)
	})
	t.Logf("Ready=True %s after a pod was made by hand", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	e.kubectl("delete", "pod", "byhand", "--wait=false")
	e.waitHooked("wh", "Ready=False NoReadyEndpoints again once that pod is gone", notReady)
	t.Logf("Ready=False %s after the pod's deletion", time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	e.applyHooked("wh", "  replicas: 1\n")
	n, _ = e.waitHookedReady("wh")
	t.Logf("Ready=True %s after the backend was scaled to 1:\n%s", time.Since(start).Round(100*time.Millisecond), n)
	if rr := n.cond(typeResourcesReady); rr == nil || rr.Reason != reasonAllResourcesCurrent {
		t.Errorf("ResourcesReady after the scale: %+v", rr)
	}
}
