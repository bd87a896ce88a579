package readiness

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// verdict is a rule's judgement of one object, replacing kstatus'.
type verdict struct {
	// Status is Current, InProgress or Failed.
	Status kstatus.Status
	// Reason is the class of what is wrong (status.ReasonNoReadyEndpoints,
	// ...); empty when the object is Current.
	Reason string
	// Message says why on one line; text the cluster wrote is marked
	// status.Foreign.
	Message string
	// Advisory: the object is reported, not counted (Result.Advisory).
	Advisory bool
	// RecheckAt, for a verdict that rests on reads nothing watches, is when
	// they are due again (Result.RecheckAt); zero otherwise.
	RecheckAt time.Time
}

// Kinds with rules of their own.
var (
	serviceGK                 = schema.GroupKind{Kind: "Service"}
	ingressGK                 = schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}
	validatingWebhookConfigGK = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}
	mutatingWebhookConfigGK   = schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}
)

// ownRule judges u, an object read without error that kstatus found
// Current, by a rule of our own for its kind: kinds kstatus calls Current
// though they may not work (webhook configurations, Services, Ingresses,
// APIServices). ok is false for a kind with no rule, when the rule finds
// nothing wrong, or when a read the rule needs failed: kstatus' verdict
// then stands. Each kind's rule lives in a file of its own; this is only
// the dispatch.
func (c Checker) ownRule(ctx context.Context, u *unstructured.Unstructured) (v verdict, ok bool) {
	switch u.GroupVersionKind().GroupKind() {
	case serviceGK:
		return c.serviceRule(ctx, u)
	case ingressGK:
		return c.ingressRule(u)
	case validatingWebhookConfigGK, mutatingWebhookConfigGK:
		return c.webhookRule(ctx, u)
	case apiServiceKind:
		return apiServiceVerdict(u), true
	}
	return verdict{}, false
}

// apply replaces res' verdict by v's, the message redacted and bounded.
func (v verdict) apply(res *Result, redactor status.Redactor) {
	res.Status, res.Reason, res.Advisory, res.RecheckAt = v.Status, v.Reason, v.Advisory, v.RecheckAt
	res.Message = redactor.Safe(v.Message, MaxObjectMessageLength)
}

// ReadKinds are the kinds Check reads for the objects refs names: their
// own kinds (Kinds), and EndpointSlices when one is a Service or a webhook
// configuration. The reconciler has the cache of the releases' objects
// watch them all, so that a change to any wakes the resource.
func ReadKinds(refs []ObjectRef) []schema.GroupVersionKind {
	kinds := Kinds(refs)
	for _, gvk := range kinds {
		switch gvk.GroupKind() {
		case serviceGK, validatingWebhookConfigGK, mutatingWebhookConfigGK:
			return append(kinds, EndpointSliceGVK)
		}
	}
	return kinds
}

// releaseServices are the Services refs names.
func releaseServices(refs []ObjectRef) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for _, r := range refs {
		if r.GroupVersionKind().GroupKind() == serviceGK {
			out[types.NamespacedName{Namespace: r.Namespace, Name: r.Name}] = true
		}
	}
	return out
}

// ruleReadFailed logs a read a rule needed that failed: the object's
// verdict is then kstatus', as before the rule.
func (c Checker) ruleReadFailed(ctx context.Context, u *unstructured.Unstructured, err error) {
	logf.FromContext(ctx).V(1).Info("a read to judge an object failed; its kstatus verdict stands",
		"kind", u.GetKind(), "namespace", u.GetNamespace(), "name", u.GetName(), "error", err.Error())
}

// now is the Checker's clock.
func (c Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
