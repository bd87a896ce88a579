package readiness

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

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
}

// ownRule judges u, an object read without error that kstatus found
// Current, by a rule of our own for its kind: kinds kstatus calls Current
// though they may not work (webhook configurations, Services, Ingresses,
// APIServices). ok is false for a kind with no rule, or when a read the
// rule needs failed: kstatus' verdict then stands. Each kind's rule lives
// in a file of its own; this is only the dispatch.
func (c Checker) ownRule(ctx context.Context, u *unstructured.Unstructured) (v verdict, ok bool) {
	switch u.GroupVersionKind().GroupKind() {
	case apiServiceKind:
		return apiServiceVerdict(u), true
	}
	return verdict{}, false
}

// apply replaces res' verdict by v's, the message redacted and bounded.
func (v verdict) apply(res *Result, redactor status.Redactor) {
	res.Status, res.Reason, res.Advisory = v.Status, v.Reason, v.Advisory
	res.Message = redactor.Safe(v.Message, MaxObjectMessageLength)
}
