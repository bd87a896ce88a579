package readiness

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// webhookRule judges a ValidatingWebhookConfiguration or
// MutatingWebhookConfiguration: each webhook that calls a Service
// (clientConfig.service) needs that Service to exist
// (WebhookServiceNotFound), to have a ready endpoint unless it is an
// ExternalName one (NoReadyEndpoints), and a clientConfig.caBundle
// (CABundlePending: an injector such as cert-manager's CA injector may fill
// it in after the install). A webhook that calls a URL is not checked: the
// API server reaches it outside the cluster's Services. The first webhook
// found wrong, in the configuration's order, is named, with how many more
// are.
//
// A Service of the release (and its slices) is read from the cache of the
// releases' objects, and its changes wake the resource. One outside the
// release is read live, so its verdict is remembered per version of the
// configuration while it is not ready and read again on the causes'
// backoff (Causes, FirstRecheck..MaxRecheck).
func (c Checker) webhookRule(ctx context.Context, u *unstructured.Unstructured) (verdict, bool) {
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	outside := false
	for _, raw := range hooks {
		if ns, name, ok := webhookService(raw); ok && !c.services[types.NamespacedName{Namespace: ns, Name: name}] {
			outside = true
		}
	}
	now := c.now()
	if outside {
		if cause, due, ok := c.Causes.lookup(u, now); ok && cause.known() {
			return verdict{Status: kstatus.InProgressStatus, Reason: cause.Reason, Message: cause.Message, RecheckAt: due}, true
		}
	}
	var first verdict
	wrong := 0
	for _, raw := range hooks {
		v, ok, err := c.judgeWebhook(ctx, raw)
		if err != nil {
			c.ruleReadFailed(ctx, u, err)
			return verdict{}, false
		}
		if !ok {
			continue
		}
		if wrong == 0 {
			first = v
		}
		wrong++
	}
	if wrong == 0 {
		return verdict{}, false
	}
	if wrong > 1 {
		first.Message += fmt.Sprintf("; and %d more webhook(s)", wrong-1)
	}
	if outside {
		first.RecheckAt = c.Causes.store(u, Cause{Reason: first.Reason, Message: first.Message}, now)
	}
	return first, true
}

// judgeWebhook judges one entry of webhooks: ok is true when it is not
// ready. err is a failed read other than the Service's absence.
func (c Checker) judgeWebhook(ctx context.Context, raw any) (v verdict, ok bool, err error) {
	hook, _ := raw.(map[string]any)
	ns, name, calls := webhookService(raw)
	if !calls {
		return verdict{}, false, nil
	}
	prefix := "webhook " + field(hook, "name") + ": Service " + ns + "/" + name
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("v1")
	svc.SetKind("Service")
	switch err := c.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); {
	case apierrors.IsNotFound(err):
		return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonWebhookServiceNotFound, Message: prefix + " not found"}, true, nil
	case err != nil:
		return verdict{}, false, fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
	}
	if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ != "ExternalName" {
		eps, err := serviceEndpoints(ctx, c.Reader, svc)
		if err != nil {
			return verdict{}, false, err
		}
		if eps.ready == 0 {
			return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonNoReadyEndpoints, Message: prefix + " has " + eps.noneReady()}, true, nil
		}
	}
	if ca, _, _ := unstructured.NestedString(hook, "clientConfig", "caBundle"); ca == "" {
		return verdict{Status: kstatus.InProgressStatus, Reason: status.ReasonCABundlePending,
			Message: "webhook " + field(hook, "name") + ": no clientConfig.caBundle yet (a CA injector may set it)"}, true, nil
	}
	return verdict{}, false, nil
}

// webhookService is the Service a webhook entry calls; ok is false for one
// that calls a URL.
func webhookService(raw any) (ns, name string, ok bool) {
	hook, _ := raw.(map[string]any)
	svc, found, _ := unstructured.NestedMap(hook, "clientConfig", "service")
	if !found {
		return "", "", false
	}
	return field(svc, "namespace"), field(svc, "name"), true
}
