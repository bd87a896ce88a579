package readiness

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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
	// Message says why, on one line of at most MaxObjectMessageLength bytes,
	// with the cause when one is known.
	Message string
	// Reason is the class of the cause (status.ReasonFailedCreate, ...),
	// empty when no cause is known.
	Reason string
	// RecheckAt, for an object that is not Current, is when its cause is due
	// to be looked up again (see FirstRecheck); zero when no cause is looked up.
	RecheckAt time.Time
	// Unreadable is true when reading the object failed (forbidden, a
	// timeout): nothing is known about it.
	Unreadable bool
	// Advisory is true when the object is reported but does not block
	// readiness (an address-less LoadBalancer Service or Ingress unless the
	// watch requires addresses; an object of a kind marked optional): when
	// it is not Current, Summarize lists it in Warnings and counts it
	// neither in Total nor in NotReady.
	Advisory bool
}

// Check reads each object and computes its kstatus, one Result per ref in the
// same order, looking up the cause of each object that is not Current. It
// is Checker{Reader: r}.Check.
func Check(ctx context.Context, r client.Reader, refs []ObjectRef) []Result {
	return Checker{Reader: r}.Check(ctx, refs)
}

// Checker judges the objects of a release.
type Checker struct {
	// Reader reads the objects, and lists pods and events live. It should
	// be uncached for lists (the manager's APIReader, or dependents.Reader):
	// through the manager's cached client a list of pods or events would
	// start a cluster-wide informer.
	Reader client.Reader
	// Causes, when set, remembers the causes looked up, so that an object
	// found at the version already judged costs no request until its
	// recheck is due.
	Causes *Causes
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Redactor redacts the resource's values from the text the cluster
	// wrote (kstatus' message, a read's error, a Cause's message: marked
	// status.Foreign) before an object's message is shortened; the zero
	// Redactor hides only what API field errors quote.
	Redactor status.Redactor
	// Warnings, when set, holds the API server's warnings on the writes
	// of Owner's release: an object that is not Current gets its own as
	// its cause (causeOf); one that is Current has them forgotten.
	Warnings *Warnings
	Owner    types.UID
	// RequireAddresses makes an address-less LoadBalancer Service or
	// Ingress block readiness (the watch's requireAddresses); when false
	// it is only a warning (Result.Advisory).
	RequireAddresses bool

	// services are the Services of the refs being checked (set by Check):
	// a webhook's Service among them is read from the cache.
	services map[types.NamespacedName]bool
}

// Check reads each object and computes its kstatus, one Result per ref in the
// same order. It never fails as a whole: an object that is missing is
// NotFound, one that cannot be read is Unknown with the error as its message.
// An object that is not Current gets the cause the cluster states, when
// there is one, appended to its message and its class in Reason (causeOf);
// a failure to look it up only leaves it out.
func (c Checker) Check(ctx context.Context, refs []ObjectRef) []Result {
	log := logf.FromContext(ctx)
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	results := make([]Result, 0, len(refs))
	c.services = releaseServices(refs)
	for _, ref := range refs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ref.GroupVersionKind())
		err := c.Reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u)
		res := objectResult(ref, u, err, c.Redactor)
		if err == nil && res.Status == kstatus.CurrentStatus {
			if v, ok := c.ownRule(ctx, u); ok {
				v.apply(&res, c.Redactor)
			}
		}
		switch {
		case err != nil:
		case res.Status == kstatus.CurrentStatus:
			c.Causes.forget(u.GetUID())
			c.Warnings.forget(c.Owner, ref)
		case res.Reason != "":
			// A rule of our own explained it: no events to look up.
		case res.Status == kstatus.InProgressStatus || res.Status == kstatus.FailedStatus:
			t := now()
			cause, due, ok := c.Causes.lookup(u, t)
			if !ok {
				var cerr error
				cause, cerr = causeOf(ctx, c.Reader, u, res.Status, t, c.Warnings.Of(c.Owner, ref))
				if cerr != nil {
					// The cause is a nicety; the object's verdict stands without it.
					log.V(1).Info("looking up why an object is not ready failed", "object", ref.String(), "error", cerr.Error())
				}
				due = c.Causes.store(u, cause, t)
			}
			res.RecheckAt = due
			if cause.known() {
				res.Reason = cause.Reason
				// Each part redacted before the two are shortened together.
				res.Message = status.Bound(res.Message+"; "+c.Redactor.Safe(cause.Message, MaxObjectMessageLength), MaxObjectMessageLength)
			}
		}
		results = append(results, res)
	}
	return results
}

// objectResult computes one object's Result from what reading it returned: u
// when err is nil. The error and kstatus' message (which may quote an
// object's condition, written by its controller) are text the operator did
// not write: the message is redacted by redactor before it is shortened.
func objectResult(ref ObjectRef, u *unstructured.Unstructured, err error, redactor status.Redactor) Result {
	res := Result{Ref: ref}
	switch {
	case apierrors.IsNotFound(err):
		res.Status, res.Message = kstatus.NotFoundStatus, "not found"
	case meta.IsNoMatchError(err):
		// The kind is not served (its CRD is gone): no such object can exist.
		res.Status, res.Message = kstatus.NotFoundStatus, "not found: the API server does not serve "+ref.APIVersion+" "+ref.Kind
	case err != nil:
		res.Status, res.Message, res.Unreadable = kstatus.UnknownStatus, "reading it failed: "+status.Foreign(err.Error()), true
	default:
		computed, cerr := kstatus.Compute(u)
		if cerr != nil {
			res.Status, res.Message = kstatus.UnknownStatus, "its status could not be computed: "+status.Foreign(cerr.Error())
			break
		}
		res.Status, res.Message = computed.Status, status.Foreign(computed.Message)
		if msg, ok := workloadMessage(u, computed); ok {
			res.Message = msg
		}
	}
	res.Message = redactor.Safe(res.Message, MaxObjectMessageLength)
	return res
}
