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
// a resync, an unrelated annotation. What could change the verdict (its
// verdictInputs) goes through at once: a new generation (a changed spec, a
// deletion), a new value of the retry annotation, a change to the
// annotations the operator reads (helm.sdk.operatorframework.io/*,
// helmapp.io/*), and a change to the release's storage written by someone
// else (foreignWrite), and, for an action refused for a missing permission,
// a change to a Role or RoleBinding of the resource's namespace
// (rbacChanged). A resource out of retries is held until one of the first
// two. It lives in memory; a restarted operator retries once straight away,
// within the budget the status persists.
type retryGate struct {
	mu sync.Mutex
	// held is the retry each failed resource waits for (holdUntil).
	held map[types.UID]heldRetry
	// foreignWrites counts, per resource, the changes to its release's
	// storage written by someone else (see recordwatch.go).
	foreignWrites map[types.UID]uint64
	// refusals holds the resources whose last failure was a refused action
	// (status.Failure.Refused), and rbacChanges counts, per such resource,
	// the changes to its namespace's RBAC seen since (see rbac.go).
	refusals    map[types.UID]refusalCount
	rbacChanges map[types.UID]uint64
	// sourceChanges counts, per resource, the changes to the Secrets and
	// ConfigMaps its valuesFrom references (values.go).
	sourceChanges map[types.UID]uint64
	// pending holds the statuses that could not be written (keepUnwritten).
	pending map[types.UID]unwrittenStatus
}

// verdictInputs is what a reconcile saw of what could change a held
// verdict.
type verdictInputs struct {
	generation int64
	// retry is the value of the retry annotation.
	retry string
	// annotations digests the other annotations the operator reads.
	annotations string
	// foreignWrites is the count of foreign storage changes
	// (retryGate.foreignWrites).
	foreignWrites uint64
	// rbacChanges is the count of RBAC changes seen while refused
	// (retryGate.rbacChanges).
	rbacChanges uint64
	// sourceChanges is the count of changes to referenced objects
	// (retryGate.sourceChanges).
	sourceChanges uint64
}

// heldRetry is the retry a failed resource waits for.
type heldRetry struct {
	// inputs is what the failed reconcile saw.
	inputs verdictInputs
	// until is when the retry may go; zero means never (out of retries).
	until time.Time
}

// wait reports whether the resource, whose reconcile sees inputs at now,
// must still wait, and for how long; the duration is 0 for a resource held
// until it changes.
func (g *retryGate) wait(uid types.UID, inputs verdictInputs, now time.Time) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.held[uid]
	switch {
	case !ok || h.inputs.generation != inputs.generation || h.inputs.retry != inputs.retry:
		return false, 0
	case h.until.IsZero():
		// Out of retries: held until the spec or the retry annotation changes.
		return true, 0
	case h.inputs.annotations != inputs.annotations || h.inputs.foreignWrites != inputs.foreignWrites || h.inputs.rbacChanges != inputs.rbacChanges ||
		h.inputs.sourceChanges != inputs.sourceChanges:
		return false, 0
	case !now.Before(h.until):
		return false, 0
	}
	return true, h.until.Sub(now)
}

// holdUntil records a failure seen under inputs, to be retried at until;
// the zero time holds it until it changes.
func (g *retryGate) holdUntil(uid types.UID, inputs verdictInputs, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = map[types.UID]heldRetry{}
	}
	g.held[uid] = heldRetry{inputs: inputs, until: until}
}

// holdWhileAnnotations records that a reconcile judged the resource's
// annotations anew (and stalled on them) without reaching the gate: the
// wait then goes on only as long as the annotations stay as that reconcile
// saw them, so that correcting or removing the annotation is acted on at
// once.
func (g *retryGate) holdWhileAnnotations(uid types.UID, annotations string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h, ok := g.held[uid]; ok {
		h.inputs.annotations = annotations
		g.held[uid] = h
	}
}

// foreignWrite counts a change to the resource's release storage that
// someone else wrote; foreignWritesSeen is the count so far.
func (g *retryGate) foreignWrite(uid types.UID) { g.count(&g.foreignWrites, uid) }

func (g *retryGate) foreignWritesSeen(uid types.UID) uint64 { return g.seen(&g.foreignWrites, uid) }

// count adds one to uid's count in *counts, made on first use.
func (g *retryGate) count(counts *map[types.UID]uint64, uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if *counts == nil {
		*counts = map[types.UID]uint64{}
	}
	(*counts)[uid]++
}

// seen is uid's count in *counts.
func (g *retryGate) seen(counts *map[types.UID]uint64, uid types.UID) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return (*counts)[uid]
}

// clear forgets the resource's wait after a success or its deletion.
func (g *retryGate) clear(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, uid)
	delete(g.refusals, uid)
}

// forget forgets everything about a resource that is gone.
func (g *retryGate) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, uid)
	delete(g.foreignWrites, uid)
	delete(g.refusals, uid)
	delete(g.rbacChanges, uid)
	delete(g.sourceChanges, uid)
}

// refusalCount is what the gate keeps of a resource whose action was
// refused before it ran (status.Failure.Refused): refusals are not counted
// in the status, so the backoff counts them here.
type refusalCount struct {
	key        types.NamespacedName
	generation int64
	// n counts the consecutive refusals of the generation since the last
	// change to the namespace's RBAC.
	n int64
	// woken: such a change woke the resource since its first refusal.
	woken bool
}

// refusedAgain records a refusal of generation of the resource key, and
// returns the count that sets its backoff and whether a change to the
// namespace's RBAC came since its first refusal (the count then starts at
// that change).
func (g *retryGate) refusedAgain(uid types.UID, key types.NamespacedName, generation int64) (n int64, woken bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refusals == nil {
		g.refusals = map[types.UID]refusalCount{}
	}
	c, ok := g.refusals[uid]
	if !ok || c.generation != generation {
		c = refusalCount{key: key, generation: generation}
	}
	c.n++
	g.refusals[uid] = c
	return c.n, c.woken
}

// notRefused forgets a refusal once a failure of another kind follows it.
func (g *retryGate) notRefused(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.refusals, uid)
}

// rbacChanged records a change to a Role or RoleBinding of namespace and
// returns the refused resources of that namespace, whose backoff it ends
// (see wait) and restarts.
func (g *retryGate) rbacChanged(namespace string) []types.NamespacedName {
	g.mu.Lock()
	defer g.mu.Unlock()
	var keys []types.NamespacedName
	for uid, c := range g.refusals {
		if c.key.Namespace != namespace {
			continue
		}
		if g.rbacChanges == nil {
			g.rbacChanges = map[types.UID]uint64{}
		}
		g.rbacChanges[uid]++
		c.n, c.woken = 0, true
		g.refusals[uid] = c
		keys = append(keys, c.key)
	}
	return keys
}

// sourceChanged counts a change to an object the resource's valuesFrom
// references: it ends the resource's backoff (a missing Secret created is
// read at once).
func (g *retryGate) sourceChanged(uid types.UID) { g.count(&g.sourceChanges, uid) }

func (g *retryGate) sourceChangesSeen(uid types.UID) uint64 { return g.seen(&g.sourceChanges, uid) }

func (g *retryGate) rbacChangesSeen(uid types.UID) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rbacChanges[uid]
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

// inputsOf is what a reconcile of obj sees of what could change a held
// verdict.
func (r *Reconciler) inputsOf(obj *unstructured.Unstructured) verdictInputs {
	ann := obj.GetAnnotations()
	return verdictInputs{generation: obj.GetGeneration(), retry: ann[release.AnnotationRetry],
		annotations: release.SteeringAnnotations(ann), foreignWrites: r.gate.foreignWritesSeen(obj.GetUID()),
		rbacChanges: r.gate.rbacChangesSeen(obj.GetUID()), sourceChanges: r.gate.sourceChangesSeen(obj.GetUID())}
}
