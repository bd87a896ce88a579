package operator

import (
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/release"
)

// unprobedKube is Helm's own Kubernetes client without its reachability
// probe. Helm's install, upgrade, rollback and uninstall each begin with
// KubeClient.IsReachable, a GET /version. Every reconcile has just listed
// Helm's storage on the same cluster (release.Observe) before it runs an
// action, so the probe tells nothing new; and a cluster that became
// unreachable since fails the action's first real request with its own
// error, which the reconcile reports as the action's failure.
//
// It embeds the concrete client, so that every optional interface Helm
// v3.22 type-asserts on cfg.KubeClient (InterfaceExt in hooks and
// uninstall, InterfaceThreeWayMerge in install, InterfaceLogs in hooks,
// InterfaceDeletionPropagation in uninstall, InterfaceResources in status)
// still holds; the assertions below keep it so.
type unprobedKube struct {
	*kube.Client
}

var (
	_ kube.Interface                    = unprobedKube{}
	_ kube.InterfaceExt                 = unprobedKube{}
	_ kube.InterfaceThreeWayMerge       = unprobedKube{}
	_ kube.InterfaceLogs                = unprobedKube{}
	_ kube.InterfaceDeletionPropagation = unprobedKube{}
	_ kube.InterfaceResources           = unprobedKube{}
)

// IsReachable reports the cluster reachable without asking it.
func (unprobedKube) IsReachable() error { return nil }

// withoutProbe returns kc without the reachability probe when it is Helm's
// concrete client, and kc itself otherwise (a client of unknown kind may
// implement interfaces an embedding would hide).
func withoutProbe(kc kube.Interface) kube.Interface {
	if c, ok := kc.(*kube.Client); ok {
		return unprobedKube{Client: c}
	}
	return kc
}

// preemptibleKube is unprobedKube whose waits — a hook's, and Helm's wait
// for the release's objects — go through the process' registry of running
// actions, so that a newer generation of the resource preempts them
// (release.Actions.Wait). Its applying calls (Create, Update, Delete) are
// Helm's own and are never cut short.
//
// It also keeps the objects its Create made as the API server returned them
// (dependents.Tracker.Created), so that the readiness read right after an
// install is answered without a request. Anything that may change them
// before that read — a hook, which runs and is waited for, or Helm's wait
// on the objects — drops them first: the read then goes to the server.
type preemptibleKube struct {
	unprobedKube
	actions         *release.Actions
	namespace, name string
	created         *createdKeeper
}

// createdKeeper is what one configuration's client created and kept in the
// tracker.
type createdKeeper struct {
	tracker *dependents.Tracker
	mu      sync.Mutex
	objs    []*unstructured.Unstructured
}

// keep keeps the objects of resources that the server returned (a UID and
// a version: created), and not those a failed create left as rendered.
func (c *createdKeeper) keep(resources kube.ResourceList) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, info := range resources {
		if u, ok := info.Object.(*unstructured.Unstructured); ok && u.GetUID() != "" && u.GetResourceVersion() != "" {
			c.tracker.Created(u)
			c.objs = append(c.objs, u)
		}
	}
}

// drop drops every object kept.
func (c *createdKeeper) drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.objs {
		c.tracker.Uncreated(u)
	}
	c.objs = nil
}

var (
	_ kube.Interface                    = preemptibleKube{}
	_ kube.InterfaceExt                 = preemptibleKube{}
	_ kube.InterfaceThreeWayMerge       = preemptibleKube{}
	_ kube.InterfaceLogs                = preemptibleKube{}
	_ kube.InterfaceDeletionPropagation = preemptibleKube{}
	_ kube.InterfaceResources           = preemptibleKube{}
)

// preemptible returns kc with preemptible waits for the release ns/name when
// it is unprobedKube, and kc itself otherwise.
// Objects it creates are kept in tracker when that is set.
func preemptible(kc kube.Interface, actions *release.Actions, tracker *dependents.Tracker, ns, name string) kube.Interface {
	if c, ok := kc.(unprobedKube); ok && actions != nil {
		k := preemptibleKube{unprobedKube: c, actions: actions, namespace: ns, name: name}
		if tracker != nil {
			k.created = &createdKeeper{tracker: tracker}
		}
		return k
	}
	return kc
}

// Create is Helm's create, which leaves in each resource the object the
// server returned; those are kept.
func (k preemptibleKube) Create(resources kube.ResourceList) (*kube.Result, error) {
	res, err := k.unprobedKube.Create(resources)
	k.created.keep(resources)
	return res, err
}

// Delete is Helm's delete; what was kept goes first.
func (k preemptibleKube) Delete(resources kube.ResourceList) (*kube.Result, []error) {
	k.created.drop()
	return k.unprobedKube.Delete(resources)
}

// DeleteWithPropagationPolicy is Helm's delete; what was kept goes first.
func (k preemptibleKube) DeleteWithPropagationPolicy(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	k.created.drop()
	return k.unprobedKube.DeleteWithPropagationPolicy(resources, policy)
}

// WatchUntilReady is the wait of a hook.
func (k preemptibleKube) WatchUntilReady(resources kube.ResourceList, timeout time.Duration) error {
	k.created.drop()
	return k.actions.Wait(k.namespace, k.name, release.WaitingOnHook, func() error {
		return k.unprobedKube.WatchUntilReady(resources, timeout)
	})
}

// Wait is Helm's wait for the release's objects.
func (k preemptibleKube) Wait(resources kube.ResourceList, timeout time.Duration) error {
	k.created.drop()
	return k.actions.Wait(k.namespace, k.name, release.WaitingOnWait, func() error {
		return k.unprobedKube.Wait(resources, timeout)
	})
}

// WaitWithJobs is Helm's wait for the release's objects, Jobs included.
func (k preemptibleKube) WaitWithJobs(resources kube.ResourceList, timeout time.Duration) error {
	k.created.drop()
	return k.actions.Wait(k.namespace, k.name, release.WaitingOnWait, func() error {
		return k.unprobedKube.WaitWithJobs(resources, timeout)
	})
}
