package reconciler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// rbacSettle is where the backoff of the refusals met after a change to
// the namespace's RBAC starts, if the retry backoff starts later: the API
// server's authorizer and the operator's answers of access reviews (cached
// for a few seconds) may not hold a grant yet when the change wakes the
// resource, and the retries that follow must not wait the whole backoff.
const rbacSettle = 5 * time.Second

// settled bounds d, the backoff of the n-th refusal since the namespace's
// RBAC changed: at most rbacSettle doubling with each refusal.
func settled(d time.Duration, n int64) time.Duration {
	s := rbacSettle
	for i := int64(1); i < n && s < d; i++ {
		s *= 2
	}
	return min(d, s)
}

// refusal is what the gate keeps of a resource whose action was refused
// before it ran (status.Failure.Refused): refusals are not counted in the
// status, so the backoff counts them here.
type refusal struct {
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
	if g.refused == nil {
		g.refused = map[types.UID]refusal{}
	}
	r, ok := g.refused[uid]
	if !ok || r.generation != generation {
		r = refusal{key: key, generation: generation}
	}
	r.n++
	g.refused[uid] = r
	return r.n, r.woken
}

// notRefused forgets a refusal once a failure of another kind follows it.
func (g *retryGate) notRefused(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.refused, uid)
}

// rbacChanged records a change to a Role or RoleBinding of namespace and
// returns the refused resources of that namespace, whose backoff it ends
// (see wait) and restarts.
func (g *retryGate) rbacChanged(namespace string) []types.NamespacedName {
	g.mu.Lock()
	defer g.mu.Unlock()
	var keys []types.NamespacedName
	for uid, r := range g.refused {
		if r.key.Namespace != namespace {
			continue
		}
		if g.rbac == nil {
			g.rbac = map[types.UID]uint64{}
		}
		g.rbac[uid]++
		r.n, r.woken = 0, true
		g.refused[uid] = r
		keys = append(keys, r.key)
	}
	return keys
}

func (g *retryGate) rbacSeen(uid types.UID) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rbac[uid]
}

// rbacEvents handles the changes to the Roles and RoleBindings of the
// watched namespaces, seen through a metadata-only watch: each created,
// changed or deleted one reconciles at once the resources of its namespace
// whose install or upgrade was refused for a missing permission, whatever
// their backoff; a grant then takes effect without any edit of the
// resource. Nothing else is woken: the objects listed when the watch
// starts, and every change in a namespace without a refused resource, cost
// a map lookup.
func (r *Reconciler) rbacEvents() handler.EventHandler {
	wake := func(obj client.Object, q queue) {
		for _, key := range r.gate.rbacChanged(obj.GetNamespace()) {
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if !e.IsInInitialList {
				wake(e.Object, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				wake(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) { wake(e.Object, q) },
	}
}
