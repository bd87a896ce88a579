//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// upstreamCase is one chart no one here wrote and the kind the command
// makes of it.
type upstreamCase struct {
	name        string
	chart       upstreamChart
	kind, group string
	// injected are the webhook configurations (resource/name) whose
	// caBundle the chart leaves to its own controller, which writes it
	// once it runs: on kwok nothing runs, so the test writes it, as that
	// controller would (issue 40: a webhook without a caBundle is not ready).
	injected []string
}

var upstreamCases = []upstreamCase{
	{name: "sealed-secrets", chart: sealedSecretsChart, kind: "SealedSecretsController", group: "security"},
	// Gatekeeper's cert rotator, in its controller manager, injects the CA.
	{name: "gatekeeper", chart: gatekeeperChart, kind: "Gatekeeper", group: "policy", injected: []string{
		"validatingwebhookconfigurations/gatekeeper-validating-webhook-configuration",
		"mutatingwebhookconfigurations/gatekeeper-mutating-webhook-configuration"}},
	{name: "secrets-store-csi-driver", chart: csiDriverChart, kind: "SecretsStoreCSIDriver", group: "csi"},
}

// TestUpstreamCharts makes an operator of each upstream chart the way its
// author would, with the command, in a scratch copy of this project, and
// runs it under exactly the RBAC the command generated: the sample resource
// becomes Ready=True, `helm list` shows the release deployed, and deleting
// the resource removes the release and every object it made, cluster-scoped
// ones included, while the CRDs of its crds/ stay (Helm's rule).
func TestUpstreamCharts(t *testing.T) {
	for _, c := range upstreamCases {
		t.Run(c.name, func(t *testing.T) {
			p := newProject(t)
			p.addChart(c.chart.dir(t), c.kind, c.group)
			manager := p.build()
			namespaced, cluster := p.generatedRoles()
			r := p.start(t, manager, namespaced, cluster)

			name := p.sampleName()
			r.kubectl("apply", "-f", p.sample)
			if len(c.injected) > 0 {
				r.wait(name, "the sample "+name+" deployed", func(n *nginx) bool { return n.is("Deployed", metav1.ConditionTrue) })
				for _, w := range c.injected {
					injectCABundle(t, w)
				}
			}
			n := r.wait(name, "the sample "+name+" settled", settled)
			ready := n.cond("Ready")
			t.Logf("%s/%s: Ready=%s %s: %s", c.kind, name, ready.Status, ready.Reason, ready.Message)
			// Each of the three becomes ready on the fake node: kwok runs
			// their pods and completes their hook Jobs.
			if ready.Status != metav1.ConditionTrue {
				t.Fatalf("the sample settled not Ready:\n%s\noperator log: %s", n, r.logPath)
			}

			listed := r.helmList()
			if len(listed) != 1 || listed[0].Name != name || listed[0].Status != "deployed" {
				t.Fatalf("helm list -n %s --all: %+v, want release %s deployed", r.ns, listed, name)
			}
			t.Logf("helm list: %s %s revision %s %s", listed[0].Name, listed[0].Chart, listed[0].Revision, listed[0].Status)

			manifest, hooks := r.releaseObjects(name)
			r.deleteAndCheckGone(name, manifest, hooks)
		})
	}
}

// TestUpstreamPermissionDenied takes one rule away from what the command
// generated for sealed-secrets (every grant on ClusterRoleBindings, a
// cluster-scoped kind the chart creates) and runs the operator under the
// rest: the sample is refused before Helm runs, Ready=False PermissionDenied
// naming exactly that permission, and nothing is installed. The rule given
// back, the refused install is retried and the sample becomes Ready with no
// edit.
func TestUpstreamPermissionDenied(t *testing.T) {
	p := newProject(t)
	p.addChart(sealedSecretsChart.dir(t), "SealedSecretsController", "security")
	manager := p.build()
	namespaced, generated := p.generatedRoles()
	cluster, err := withoutResource(generated, "rbac.authorization.k8s.io", "clusterrolebindings")
	if err != nil {
		t.Fatalf("the generated manager-cluster-role: %v", err)
	}
	r := p.start(t, manager, namespaced, cluster)

	name := p.sampleName()
	r.kubectl("apply", "-f", p.sample)
	n := r.wait(name, "the sample "+name+" Ready=False PermissionDenied", func(n *nginx) bool {
		return n.is("Ready", metav1.ConditionFalse) && n.cond("Ready").Reason == "PermissionDenied"
	})
	ready := n.cond("Ready")
	t.Logf("%s/%s: Ready=%s %s: %s", p.kind, name, ready.Status, ready.Reason, ready.Message)
	want := "The operator's own identity may not: create clusterrolebindings.rbac.authorization.k8s.io, get clusterrolebindings.rbac.authorization.k8s.io (cluster-wide);"
	if !strings.HasPrefix(ready.Message, want) {
		t.Errorf("Ready's message %q, want it to begin %q", ready.Message, want)
	}
	if l := r.helmList(); len(l) != 0 {
		t.Errorf("helm list -n %s --all: %+v, want nothing: the install was refused before Helm ran", r.ns, l)
	}

	// The generated roles whole again (a ClusterRole's change wakes no
	// resource: the refused install is retried by its backoff).
	r.apply("grants", r.grants(namespaced, generated))
	r.wait(name, "the sample "+name+" Ready once the rule is granted", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
	if l := r.helmList(); len(l) != 1 || l[0].Status != "deployed" || l[0].Revision != "1" {
		t.Errorf("helm list -n %s --all: %+v, want revision 1 deployed", r.ns, l)
	}
}

// injectCABundle writes a caBundle into each webhook of the webhook
// configuration resource/name that has none, as a CA injector would (the
// API server never calls these webhooks successfully on kwok either way:
// their pods do not serve).
func injectCABundle(t *testing.T, webhook string) {
	t.Helper()
	resource, name, _ := strings.Cut(webhook, "/")
	gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
	ctx := context.Background()
	u, err := suite.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s: %v", webhook, err)
	}
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\ninjected by the test\n-----END CERTIFICATE-----\n"))
	for _, h := range hooks {
		if cc, ok := h.(map[string]any)["clientConfig"].(map[string]any); ok && cc["caBundle"] == nil {
			cc["caBundle"] = ca
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.dyn.Resource(gvr).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the caBundle of %s: %v", webhook, err)
	}
}
