package readiness_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// createCRD creates the namespaced CRD of kind Widget (plural widgets) in a
// group of its own, with the status subresource when withStatus, waits until
// it is served and returns its group.
func createCRD(t *testing.T, c client.Client, withStatus bool) string {
	t.Helper()
	group := rand.String(6) + ".example.com"
	subresources := ""
	if withStatus {
		subresources = "\n    subresources: {status: {}}"
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.`+group+`}
spec:
  group: `+group+`
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true`+subresources+`
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`), &crd.Object); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	testutil.Eventually(t, 30*time.Second, "the CRD to be established", func() (bool, string) {
		w := &unstructured.UnstructuredList{}
		w.SetAPIVersion(group + "/v1")
		w.SetKind("WidgetList")
		// A client of its own: a client's REST mapper remembers a group it
		// did not find.
		err := testutil.Client(t, cfg).List(ctx, w)
		return err == nil, "listing widgets: " + fmt.Sprint(err)
	})
	return group
}

func must(s *readiness.StatusSubresources, _ func() int) *readiness.StatusSubresources { return s }

func createWidget(t *testing.T, c client.Client, ns, group, name string) *unstructured.Unstructured {
	t.Helper()
	w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": "L"}}}
	w.SetAPIVersion(group + "/v1")
	w.SetKind("Widget")
	w.SetNamespace(ns)
	w.SetName(name)
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

// subresources returns a StatusSubresources over cfg, and a count of the
// discovery requests it made for a group version (GET /apis/<group>/<version>).
func subresources(t *testing.T) (*readiness.StatusSubresources, func() int) {
	t.Helper()
	var mu sync.Mutex
	discoveries := 0
	counted := testutil.RecordRequests(cfg, func(r testutil.Request) {
		if strings.Count(r.Path, "/") == 3 && strings.HasPrefix(r.Path, "/apis/") && strings.HasSuffix(r.Path, ".example.com/v1") {
			mu.Lock()
			discoveries++
			mu.Unlock()
		}
	})
	hc, err := rest.HTTPClientFor(counted)
	if err != nil {
		t.Fatal(err)
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(counted, hc)
	if err != nil {
		t.Fatal(err)
	}
	// The mapper's own discovery is not the memo's: counted from here.
	mu.Lock()
	discoveries = 0
	mu.Unlock()
	return readiness.NewStatusSubresources(m, dc), func() int { mu.Lock(); defer mu.Unlock(); return discoveries }
}

// A custom resource whose CRD has a status subresource and that reported
// nothing is InProgress NoStatusReported, not Current; discovery is asked
// once per kind, not on every check; once its controller writes a status it is
// Current. A CRD without the subresource leaves kstatus' Current.
func TestCheckCustomResourceWithoutStatus(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "custom")
	withStatus, without := createCRD(t, c, true), createCRD(t, c, false)
	createWidget(t, c, ns, withStatus, "a")
	createWidget(t, c, ns, withStatus, "b")
	createWidget(t, c, ns, without, "c")

	subs, discoveries := subresources(t)
	checker := readiness.Checker{Reader: c, Causes: readiness.NewCauses(), Subresources: subs}
	refs := []readiness.ObjectRef{
		{APIVersion: withStatus + "/v1", Kind: "Widget", Namespace: ns, Name: "a"},
		{APIVersion: withStatus + "/v1", Kind: "Widget", Namespace: ns, Name: "b"},
		{APIVersion: without + "/v1", Kind: "Widget", Namespace: ns, Name: "c"},
	}
	check := func() []readiness.Result {
		t.Helper()
		got := checker.Check(ctx, refs)
		if len(got) != 3 {
			t.Fatalf("Check returned %d results", len(got))
		}
		return got
	}
	got := check()
	for _, r := range got[:2] {
		if r.Status != kstatus.InProgressStatus || r.Reason != status.ReasonNoStatusReported ||
			r.Message != "no status reported yet: its controller has not acted on it" {
			t.Errorf("%s: %s %s %q, want InProgress NoStatusReported", r.Ref, r.Status, r.Reason, r.Message)
		}
	}
	if got[2].Status != kstatus.CurrentStatus || got[2].Reason != "" {
		t.Errorf("a kind whose CRD has no status subresource: %s %s, want Current", got[2].Status, got[2].Reason)
	}
	sum := readiness.Summarize(got)
	if sum.AllReady || sum.Reason != status.ReasonNoStatusReported {
		t.Errorf("Summarize: ready %t, reason %s; want not ready, NoStatusReported", sum.AllReady, sum.Reason)
	}
	if n := discoveries(); n != 2 {
		t.Errorf("%d discovery requests for two kinds, want 2", n)
	}
	check()
	if n := discoveries(); n != 2 {
		t.Errorf("a second check asked discovery again: %d requests in all, want 2", n)
	}

	// Its controller reports: Current.
	a := &unstructured.Unstructured{}
	a.SetAPIVersion(withStatus + "/v1")
	a.SetKind("Widget")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(a.Object, int64(1), "status", "observedGeneration")
	if err := c.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := check(); got[0].Status != kstatus.CurrentStatus || got[1].Reason != status.ReasonNoStatusReported {
		t.Errorf("after a's controller reported: a %s, b %s; want Current, NoStatusReported", got[0].Status, got[1].Reason)
	}
}

// A health check replaces kstatus' verdict: the failed rule, on the status
// a controller wrote, makes the object Failed HealthCheckFailed with the
// object's own message; an optional kind is advisory.
func TestCheckHealthRules(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "health")
	group := createCRD(t, c, true)
	w := createWidget(t, c, ns, group, "a")
	_ = unstructured.SetNestedSlice(w.Object, []any{map[string]any{"type": "Ready", "status": "False",
		"reason": "IssuerNotFound", "message": "issuer letsencrypt not found", "lastTransitionTime": "2026-12-06T14:00:00Z"}},
		"status", "conditions")
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	ref := []readiness.ObjectRef{{APIVersion: group + "/v1", Kind: "Widget", Namespace: ns, Name: "a"}}

	// Without a rule, kstatus' InProgress, with the object's own reason.
	got := readiness.Checker{Reader: c, Subresources: must(subresources(t))}.Check(ctx, ref)
	if got[0].Status != kstatus.InProgressStatus || !strings.HasPrefix(got[0].Message, "Ready=False IssuerNotFound: issuer letsencrypt not found") {
		t.Errorf("without a rule: %s %q", got[0].Status, got[0].Message)
	}

	for _, tc := range []struct {
		name     string
		check    readiness.HealthCheck
		want     kstatus.Status
		reason   string
		message  string
		advisory bool
	}{
		{"failed with a message expression", readiness.HealthCheck{
			Current: "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
			Failed:  "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False' && c.reason == 'IssuerNotFound')",
			Message: "status.conditions.filter(c, c.type == 'Ready')[0].message"},
			kstatus.FailedStatus, status.ReasonHealthCheckFailed, "issuer letsencrypt not found", false},
		{"failed, the object's own Ready condition as the message", readiness.HealthCheck{
			Failed: "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"},
			kstatus.FailedStatus, status.ReasonHealthCheckFailed, "Ready=False IssuerNotFound: issuer letsencrypt not found", false},
		{"optional", readiness.HealthCheck{Optional: true,
			Failed: "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"},
			kstatus.FailedStatus, status.ReasonHealthCheckFailed, "Ready=False IssuerNotFound: issuer letsencrypt not found", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check.APIVersion, tc.check.Kind = group+"/v1", "Widget"
			rules, err := readiness.CompileRules([]readiness.HealthCheck{tc.check})
			if err != nil {
				t.Fatal(err)
			}
			got := readiness.Checker{Reader: c, Rules: rules, Subresources: must(subresources(t))}.Check(ctx, ref)
			r := got[0]
			if r.Status != tc.want || r.Reason != tc.reason || r.Message != tc.message || r.Advisory != tc.advisory {
				t.Errorf("Check: %s %s %q advisory %t; want %s %s %q advisory %t", r.Status, r.Reason, r.Message, r.Advisory,
					tc.want, tc.reason, tc.message, tc.advisory)
			}
			sum := readiness.Summarize(got)
			if sum.AllReady == !tc.advisory {
				t.Errorf("Summarize: ready %t, %s %q", sum.AllReady, sum.Reason, sum.Message)
			}
		})
	}
}
