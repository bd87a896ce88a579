package readiness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// createService creates the Service name in ns, labelled app=name, with a
// selector unless typ is ExternalName.
func createService(t *testing.T, c client.Client, ns, name string, typ corev1.ServiceType) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name, "tier": "web"}},
		Spec:       corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	if typ == corev1.ServiceTypeExternalName {
		svc.Spec.Selector, svc.Spec.ExternalName = nil, "example.com"
	}
	if err := c.Create(context.Background(), svc); err != nil {
		t.Fatalf("creating Service %s: %v", name, err)
	}
	return svc
}

// createSlice creates an EndpointSlice of svc as the EndpointSlice
// controller would (its labels copied, kubernetes.io/service-name), with
// one endpoint per entry of ready (nil: conditions.ready unset).
func createSlice(t *testing.T, c client.Client, svc *corev1.Service, name string, ready ...*bool) *discoveryv1.EndpointSlice {
	t.Helper()
	l := map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	for k, v := range svc.Labels {
		l[k] = v
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: name, Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0." + string(rune('1'+i))},
			Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatalf("creating EndpointSlice %s: %v", name, err)
	}
	return s
}

func checkOne(t *testing.T, ch readiness.Checker, refs []readiness.ObjectRef, want readiness.ObjectRef) readiness.Result {
	t.Helper()
	for _, r := range ch.Check(context.Background(), refs) {
		if r.Ref == want {
			return r
		}
	}
	t.Fatalf("no result for %s", want)
	return readiness.Result{}
}

func TestServiceNeedsAReadyEndpoint(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "svc-endpoints")
	svc := createService(t, c, ns, "web", corev1.ServiceTypeClusterIP)
	createService(t, c, ns, "ext", corev1.ServiceTypeExternalName)
	manual := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manual"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := c.Create(ctx, manual); err != nil {
		t.Fatal(err)
	}
	ref := readiness.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: "web"}
	ch := readiness.Checker{Reader: c}
	refs := []readiness.ObjectRef{ref}

	r := checkOne(t, ch, refs, ref)
	if r.Status != kstatus.InProgressStatus || r.Reason != status.ReasonNoReadyEndpoints ||
		r.Message != "no ready endpoint: no EndpointSlice lists it yet" || r.Advisory {
		t.Errorf("no slice: %+v", r)
	}
	empty := createSlice(t, c, svc, "web-a")
	if r = checkOne(t, ch, refs, ref); r.Reason != status.ReasonNoReadyEndpoints || r.Message != "no ready endpoint: no running pod matches its selector" {
		t.Errorf("a slice without endpoints: %+v", r)
	}
	createSlice(t, c, svc, "web-b", ptr.To(false), ptr.To(false))
	if r = checkOne(t, ch, refs, ref); r.Reason != status.ReasonNoReadyEndpoints || r.Message != "no ready endpoint: 2 endpoints not ready" {
		t.Errorf("endpoints not ready: %+v", r)
	}
	// A slice of another Service, or one without the Service's labels (not
	// the EndpointSlice controller's), does not count.
	other := createService(t, c, ns, "other", corev1.ServiceTypeClusterIP)
	createSlice(t, c, other, "other-a", ptr.To(true))
	unlabelled := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-by-hand",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.1.1"}}}}
	if err := c.Create(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	if r = checkOne(t, ch, refs, ref); r.Status != kstatus.InProgressStatus {
		t.Errorf("another Service's ready endpoint counted: %+v", r)
	}

	// conditions.ready unset means ready, as the API says.
	if err := c.Delete(ctx, empty); err != nil {
		t.Fatal(err)
	}
	createSlice(t, c, svc, "web-c", ptr.To(false), nil)
	if r = checkOne(t, ch, refs, ref); r.Status != kstatus.CurrentStatus || r.Reason != "" || r.Message != "Service is ready" {
		t.Errorf("a ready endpoint: %+v; want kstatus' Current", r)
	}

	// No selector (endpoints managed by hand) or ExternalName: no rule.
	for _, name := range []string{"ext", "manual"} {
		ref := readiness.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: name}
		if r := checkOne(t, ch, []readiness.ObjectRef{ref}, ref); r.Status != kstatus.CurrentStatus {
			t.Errorf("Service %s: %+v; want Current", name, r)
		}
	}
}

func TestAddressesAreWarningsUnlessRequired(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "addresses")
	lb := createService(t, c, ns, "lb", corev1.ServiceTypeLoadBalancer)
	createSlice(t, c, lb, "lb-a", ptr.To(true))
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "lb", Port: networkingv1.ServiceBackendPort{Number: 443}}}}}
	if err := c.Create(ctx, ing); err != nil {
		t.Fatal(err)
	}
	refs := []readiness.ObjectRef{
		{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: "lb"},
		{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Namespace: ns, Name: "web"},
		{APIVersion: "v1", Kind: "Namespace", Name: ns},
	}

	results := readiness.Checker{Reader: c}.Check(ctx, refs)
	for _, r := range results[:2] {
		if r.Status != kstatus.InProgressStatus || r.Reason != status.ReasonNoAddress || !r.Advisory || r.Message != "no load-balancer address yet" {
			t.Errorf("%s by default: %+v; want an advisory NoAddress", r.Ref, r)
		}
	}
	s := readiness.Summarize(results)
	want := "All 1 resources are Current; 2 warnings: Ingress web: no load-balancer address yet; and 1 more"
	if !s.AllReady || s.Total != 1 || s.Message != want || len(s.Warnings) != 2 {
		t.Errorf("Summarize() = %+v; want ready with two warnings, message %q", s, want)
	}

	required := readiness.Checker{Reader: c, RequireAddresses: true}.Check(ctx, refs)
	s = readiness.Summarize(required)
	if required[0].Advisory || required[1].Advisory || s.AllReady || s.Reason != status.ReasonNoAddress || s.Total != 3 || len(s.Warnings) != 0 {
		t.Errorf("requireAddresses: %+v; want NoAddress blocking", s)
	}

	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	if err := c.Status().Update(ctx, lb); err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{Hostname: "web.example.com"}}
	if err := c.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	s = readiness.Summarize(readiness.Checker{Reader: c, RequireAddresses: true}.Check(ctx, refs))
	if !s.AllReady || s.Total != 3 || s.Message != "All 3 resources are Current" {
		t.Errorf("with addresses: %+v; want all 3 Current", s)
	}
}

// webhookConfig returns a validating webhook configuration whose webhooks
// match nothing (an objectSelector on a label no object carries), so that
// failurePolicy Fail blocks no write of the shared API server.
func webhookConfig(name string, hooks ...admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.ValidatingWebhookConfiguration {
	for i := range hooks {
		hooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		hooks[i].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNone)
		hooks[i].AdmissionReviewVersions = []string{"v1"}
		hooks[i].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"readiness-test/matches": "nothing-" + name}}
		hooks[i].Rules = []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
}

func serviceHook(name, ns, svc string, ca []byte) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svc, Port: ptr.To[int32](443)}, CABundle: ca}}
}

func TestWebhookConfigurationNeedsItsService(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "webhooks")
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	name := "readiness-" + rand.String(5)
	url := "https://hooks.example.com/validate"
	wh := webhookConfig(name,
		admissionregistrationv1.ValidatingWebhook{Name: "url.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url}},
		serviceHook("vpod.example.com", ns, "webhook", nil),
		serviceHook("vcm.example.com", ns, "webhook", ca))
	if err := c.Create(ctx, wh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), wh) })
	ref := readiness.ObjectRef{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration", Name: name}
	svcRef := readiness.ObjectRef{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: "webhook"}
	ch := readiness.Checker{Reader: c}
	// The Service is in the release: no memo, each check reads anew.
	refs := []readiness.ObjectRef{ref, svcRef}

	r := checkOne(t, ch, refs, ref)
	if want := "webhook vpod.example.com: Service " + ns + "/webhook not found; and 1 more webhook(s)"; r.Status != kstatus.InProgressStatus ||
		r.Reason != status.ReasonWebhookServiceNotFound || r.Message != want {
		t.Errorf("no Service: %+v; want WebhookServiceNotFound %q", r, want)
	}
	svc := createService(t, c, ns, "webhook", corev1.ServiceTypeClusterIP)
	r = checkOne(t, ch, refs, ref)
	if want := "webhook vpod.example.com: Service " + ns + "/webhook has no ready endpoint: no EndpointSlice lists it yet; and 1 more webhook(s)"; r.Reason != status.ReasonNoReadyEndpoints || r.Message != want {
		t.Errorf("no endpoint: %+v; want NoReadyEndpoints %q", r, want)
	}
	createSlice(t, c, svc, "webhook-a", ptr.To(true))
	r = checkOne(t, ch, refs, ref)
	if want := "webhook vpod.example.com: no clientConfig.caBundle yet (a CA injector may set it)"; r.Reason != status.ReasonCABundlePending || r.Message != want {
		t.Errorf("no caBundle: %+v; want CABundlePending %q", r, want)
	}
	// An injector fills the caBundle in.
	if err := c.Get(ctx, client.ObjectKeyFromObject(wh), wh); err != nil {
		t.Fatal(err)
	}
	wh.Webhooks[1].ClientConfig.CABundle = ca
	if err := c.Update(ctx, wh); err != nil {
		t.Fatal(err)
	}
	if r = checkOne(t, ch, refs, ref); r.Status != kstatus.CurrentStatus || r.Reason != "" {
		t.Errorf("served: %+v; want Current", r)
	}
}

// A webhook's Service outside the release is read live: while the
// configuration is not ready its verdict is remembered, and read again on
// the causes' backoff.
func TestWebhookServiceOutsideTheReleaseIsRecheckedOnABackoff(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "webhooks-outside")
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	name := "readiness-" + rand.String(5)
	mwh := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mpod.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "shared"}, CABundle: ca},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"readiness-test/matches": "nothing-" + name}},
		}}}
	if err := c.Create(ctx, mwh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), mwh) })
	svc := createService(t, c, ns, "shared", corev1.ServiceTypeClusterIP)
	ref := readiness.ObjectRef{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration", Name: name}
	now := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	ch := readiness.Checker{Reader: c, Causes: readiness.NewCauses(), Now: func() time.Time { return now }}

	r := checkOne(t, ch, []readiness.ObjectRef{ref}, ref)
	if r.Reason != status.ReasonNoReadyEndpoints || !r.RecheckAt.Equal(now.Add(readiness.FirstRecheck)) ||
		!strings.HasPrefix(r.Message, "webhook mpod.example.com: Service "+ns+"/shared has no ready endpoint") {
		t.Fatalf("no endpoint: %+v; want NoReadyEndpoints, recheck at %s", r, now.Add(readiness.FirstRecheck))
	}
	createSlice(t, c, svc, "shared-a", ptr.To(true))
	if r = checkOne(t, ch, []readiness.ObjectRef{ref}, ref); r.Reason != status.ReasonNoReadyEndpoints {
		t.Errorf("before the recheck is due: %+v; want the remembered verdict", r)
	}
	now = now.Add(readiness.FirstRecheck)
	if r = checkOne(t, ch, []readiness.ObjectRef{ref}, ref); r.Status != kstatus.CurrentStatus {
		t.Errorf("when the recheck is due: %+v; want Current", r)
	}
}
