package readiness

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// MaxObjectMessageLength bounds the message of one object, in bytes: up to
// ten of them are listed in the status, and three make the condition's message.
const MaxObjectMessageLength = 300

// Result is the readiness of one object.
type Result struct {
	Ref ObjectRef
	// Status is kstatus's verdict: Current, InProgress, Failed, Terminating,
	// NotFound, or Unknown when the object could not be read or judged.
	Status kstatus.Status
	// Message says why, on one line of at most MaxObjectMessageLength bytes.
	Message string
	// Unreadable is true when reading the object failed (forbidden, a
	// timeout): nothing is known about it.
	Unreadable bool
}

// Check reads each object and computes its kstatus, one Result per ref in the
// same order. It never fails as a whole: an object that is missing is
// NotFound, one that cannot be read is Unknown with the error as its message.
// A Deployment, StatefulSet or DaemonSet that is not Current gets a hint about
// its unschedulable pods appended (see PodHints).
//
// r should be an uncached reader (the manager's APIReader): through the
// manager's cached client the typed Pod list of PodHints would start a
// cluster-wide informer on Pods.
func Check(ctx context.Context, r client.Reader, refs []ObjectRef) []Result {
	log := logf.FromContext(ctx)
	results := make([]Result, 0, len(refs))
	for _, ref := range refs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ref.GroupVersionKind())
		err := r.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u)
		res := objectResult(ref, u, err)
		if err == nil && needsPodHint(u, res.Status) {
			sel, ok := podSelector(u)
			if ok {
				hint, herr := PodHints(ctx, r, ref.Namespace, sel)
				if herr != nil {
					// The hint is a nicety; the object's verdict stands without it.
					log.V(1).Info("listing pods for a readiness hint failed", "object", ref.String(), "error", herr.Error())
				} else if hint != "" {
					res.Message = status.Bound(res.Message+"; "+hint, MaxObjectMessageLength)
				}
			}
		}
		results = append(results, res)
	}
	return results
}

// objectResult computes one object's Result from what reading it returned: u
// when err is nil.
func objectResult(ref ObjectRef, u *unstructured.Unstructured, err error) Result {
	res := Result{Ref: ref}
	switch {
	case apierrors.IsNotFound(err):
		res.Status, res.Message = kstatus.NotFoundStatus, "not found"
	case meta.IsNoMatchError(err):
		// The kind is not served (its CRD is gone): no such object can exist.
		res.Status, res.Message = kstatus.NotFoundStatus, "not found: the API server does not serve "+ref.APIVersion+" "+ref.Kind
	case err != nil:
		res.Status, res.Message, res.Unreadable = kstatus.UnknownStatus, "reading it failed: "+err.Error(), true
	default:
		computed, cerr := kstatus.Compute(u)
		if cerr != nil {
			res.Status, res.Message = kstatus.UnknownStatus, "its status could not be computed: "+cerr.Error()
			break
		}
		res.Status, res.Message = computed.Status, computed.Message
		if msg, ok := workloadMessage(u, computed); ok {
			res.Message = msg
		}
	}
	res.Message = status.Bound(res.Message, MaxObjectMessageLength)
	return res
}
