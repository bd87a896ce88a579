package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// retryGate holds back the retry of a failed resource until its backoff has
// passed (or, for a release locked by someone else, until the lock is
// stale), whatever event wakes the controller in between that cannot change
// the verdict: a change to one of the release's objects that a reconcile
// already read, the operator's own status, finalizer or Helm storage writes,
// a resync, an unrelated annotation. What could change the verdict goes
// through at once: a new generation (a changed spec, a deletion), a new value
// of the retry annotation, a change to the annotations the operator reads
// (helm.sdk.operatorframework.io/*, helmapp.io/*), and a change to the
// release's storage written by someone else (storageChanged), and, for an
// action refused for a missing permission, a change to a Role or RoleBinding
// of the resource's namespace (rbacChanged). A resource out of retries is
// held until one of the first two. It lives in memory; a restarted operator
// retries once straight away, within the budget the status persists.
type retryGate struct {
	mu  sync.Mutex
	due map[types.UID]retryAt
	// storage counts, per resource, the changes to its release's storage
	// written by someone else (see recordwatch.go).
	storage map[types.UID]uint64
	// refused holds the resources whose last failure was a refused action
	// (status.Failure.Refused), and rbac counts, per such resource, the
	// changes to its namespace's RBAC seen since (see rbac.go).
	refused map[types.UID]refusal
	rbac    map[types.UID]uint64
	// pending holds the statuses that could not be written (keepUnwritten).
	pending map[types.UID]unwrittenStatus
}

// trigger is what a reconcile saw of what could change a held verdict.
type trigger struct {
	generation int64
	// retry is the value of the retry annotation.
	retry string
	// annotations digests the other annotations the operator reads.
	annotations string
	// storage is the count of foreign storage changes (retryGate.storage).
	storage uint64
	// rbac is the count of RBAC changes seen while refused (retryGate.rbac).
	rbac uint64
}

type retryAt struct {
	// seen is what the failed reconcile saw.
	seen trigger
	// at is when the retry may go; zero means never (out of retries).
	at time.Time
}

// wait reports whether the resource must still wait, and for how long; the
// duration is 0 for a resource held until it changes.
func (g *retryGate) wait(uid types.UID, now trigger, at time.Time) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.due[uid]
	switch {
	case !ok || r.seen.generation != now.generation || r.seen.retry != now.retry:
		return false, 0
	case r.at.IsZero():
		// Out of retries: held until the spec or the retry annotation changes.
		return true, 0
	case r.seen.annotations != now.annotations || r.seen.storage != now.storage || r.seen.rbac != now.rbac:
		return false, 0
	case !at.Before(r.at):
		return false, 0
	}
	return true, r.at.Sub(at)
}

// hold records a failure seen under seen, to be retried at at; the zero
// time holds it until it changes.
func (g *retryGate) hold(uid types.UID, seen trigger, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.due == nil {
		g.due = map[types.UID]retryAt{}
	}
	g.due[uid] = retryAt{seen: seen, at: at}
}

// rejudged records that a reconcile judged the resource's annotations anew
// (and stalled on them) without reaching the gate: the wait then goes on
// only as long as the annotations stay as that reconcile saw them, so that
// correcting or removing the annotation is acted on at once.
func (g *retryGate) rejudged(uid types.UID, annotations string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.due[uid]; ok {
		r.seen.annotations = annotations
		g.due[uid] = r
	}
}

// storageChanged counts a change to the resource's release storage that
// someone else wrote; storageSeen is the count so far.
func (g *retryGate) storageChanged(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.storage == nil {
		g.storage = map[types.UID]uint64{}
	}
	g.storage[uid]++
}

func (g *retryGate) storageSeen(uid types.UID) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.storage[uid]
}

// release forgets the resource's wait after a success or its deletion.
func (g *retryGate) release(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.due, uid)
	delete(g.refused, uid)
}

// forget forgets everything about a resource that is gone.
func (g *retryGate) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.due, uid)
	delete(g.storage, uid)
	delete(g.refused, uid)
	delete(g.rbac, uid)
}

// unwrittenStatus is a status a reconcile computed but could not write.
type unwrittenStatus struct {
	generation int64
	status     status.Status
}

// keepUnwritten remembers the status of generation that could not be
// written. The next reconcile of that generation starts from it and writes
// it, even when the gate holds that reconcile back: a failed status write
// is retried soon, whatever the backoff.
func (g *retryGate) keepUnwritten(uid types.UID, generation int64, s status.Status) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[types.UID]unwrittenStatus{}
	}
	g.pending[uid] = unwrittenStatus{generation: generation, status: *s.DeepCopy()}
}

// unwritten returns the status of generation that could not be written.
func (g *retryGate) unwritten(uid types.UID, generation int64) (status.Status, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.pending[uid]
	if !ok || p.generation != generation {
		return status.Status{}, false
	}
	return *p.status.DeepCopy(), true
}

// forgetUnwritten drops it once a status was written.
func (g *retryGate) forgetUnwritten(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pending, uid)
}

// seen is what a reconcile of obj sees of what could change a held verdict.
func (r *Reconciler) seen(obj *unstructured.Unstructured) trigger {
	ann := obj.GetAnnotations()
	return trigger{generation: obj.GetGeneration(), retry: ann[release.AnnotationRetry],
		annotations: release.SteeringAnnotations(ann), storage: r.gate.storageSeen(obj.GetUID()),
		rbac: r.gate.rbacSeen(obj.GetUID())}
}
