package readiness

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Rechecks of a not-ready object's cause. Pods and events are not watched
// (that would cache every pod or event of the cluster): while an object
// stays at the same version and not ready, its cause is looked up again
// after FirstRecheck, then at twice the last wait while the cause stays
// the same, at most MaxRecheck apart. A new version of the object, or a
// new cause, starts again at FirstRecheck.
const (
	FirstRecheck = 5 * time.Second
	MaxRecheck   = 5 * time.Minute
)

// maxEventsListed bounds the events read for one object.
const maxEventsListed = 100

// Causes remembers, per object (by UID), the cause looked up for its
// version, so that a reconcile that finds an object as it was costs no
// request. Safe for concurrent use; the zero value is not: use NewCauses.
type Causes struct {
	mu sync.Mutex
	m  map[types.UID]causeEntry
}

type causeEntry struct {
	version string
	cause   Cause
	checked time.Time
	wait    time.Duration
}

// NewCauses returns an empty memo.
func NewCauses() *Causes { return &Causes{m: map[types.UID]causeEntry{}} }

// lookup returns the remembered cause of u when it is of u's version and
// not due for a recheck at now.
func (c *Causes) lookup(u *unstructured.Unstructured, now time.Time) (Cause, time.Time, bool) {
	if c == nil {
		return Cause{}, time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[u.GetUID()]
	if !ok || e.version != u.GetResourceVersion() || !now.Before(e.checked.Add(e.wait)) {
		return Cause{}, time.Time{}, false
	}
	return e.cause, e.checked.Add(e.wait), true
}

// store remembers cause, looked up at now, and returns when it is due again.
func (c *Causes) store(u *unstructured.Unstructured, cause Cause, now time.Time) time.Time {
	if c == nil {
		return now.Add(FirstRecheck)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	wait := FirstRecheck
	if e, ok := c.m[u.GetUID()]; ok && e.version == u.GetResourceVersion() && e.cause == cause {
		wait = min(2*e.wait, MaxRecheck)
	}
	c.m[u.GetUID()] = causeEntry{version: u.GetResourceVersion(), cause: cause, checked: now, wait: wait}
	// Objects deleted while not ready leave entries: drop those not
	// looked at for long.
	for uid, e := range c.m {
		if now.Sub(e.checked) > 4*MaxRecheck {
			delete(c.m, uid)
		}
	}
	return now.Add(wait)
}

// forget drops what is remembered of an object that is ready.
func (c *Causes) forget(uid types.UID) {
	if c == nil || uid == "" {
		return
	}
	c.mu.Lock()
	delete(c.m, uid)
	c.mu.Unlock()
}

// Len is how many objects' causes are remembered.
func (c *Causes) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// causeOf looks up why u, not Current, is not ready, in the order of
// preference of docs/status.md: a workload's own conditions, its pods
// (or, for a StatefulSet or DaemonSet short of pods, its FailedCreate
// events), a Job's failure and its failed pod, a claim's events, and for
// any other object its latest Warning event. The API server's warnings on
// the object's latest write (warned, see Warnings) come right after a
// workload's own conditions. r reads pods and events; it
// must be uncached (no informer on pods or events), and events are read
// with a field selector on the object's UID.
func causeOf(ctx context.Context, r client.Reader, u *unstructured.Unstructured, st kstatus.Status, now time.Time, warned []string) (Cause, error) {
	gk := u.GroupVersionKind().GroupKind()
	workload := gk.Group == "apps" && (gk.Kind == "Deployment" || gk.Kind == "ReplicaSet" || gk.Kind == "StatefulSet" || gk.Kind == "DaemonSet")
	if w := warningCause(warned); w.known() && !workload {
		return w, nil
	}
	switch {
	case gk.Group == "apps" && (gk.Kind == "Deployment" || gk.Kind == "ReplicaSet"):
		c := workloadCondition(u)
		if c.Reason == status.ReasonFailedCreate {
			return c, nil
		}
		if w := warningCause(warned); w.known() {
			return w, nil
		}
		// A rollout past its deadline: its pods may say why.
		pc, err := workloadPodsCause(ctx, r, u, now)
		if err != nil || pc.known() {
			return pc, err
		}
		return c, nil
	case gk.Group == "apps" && (gk.Kind == "StatefulSet" || gk.Kind == "DaemonSet"):
		if shortOfPods(u) {
			events, err := warningEvents(ctx, r, u)
			if err != nil {
				return Cause{}, err
			}
			if c := eventCause(events); c.known() {
				return c, nil
			}
		}
		if w := warningCause(warned); w.known() {
			return w, nil
		}
		return workloadPodsCause(ctx, r, u, now)
	case gk.Group == "batch" && gk.Kind == "Job":
		if st != kstatus.FailedStatus {
			return Cause{}, nil
		}
		pods, err := listPods(ctx, r, u.GetNamespace(), labels.SelectorFromSet(labels.Set{"batch.kubernetes.io/controller-uid": string(u.GetUID())}))
		if err != nil {
			return Cause{}, err
		}
		return jobCause(u, pods), nil
	case gk.Group == "" && gk.Kind == "Pod":
		var p corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return Cause{}, nil
		}
		c, stuck := podsCause([]corev1.Pod{p}, now)
		if c.known() || stuck == nil {
			return c, nil
		}
		events, err := warningEvents(ctx, r, u)
		if err != nil {
			return Cause{}, err
		}
		return volumeCause(p.Name, events), nil
	case gk.Group == "" && gk.Kind == "PersistentVolumeClaim":
		events, err := objectEvents(ctx, r, u, "")
		if err != nil {
			return Cause{}, err
		}
		return claimCause(events), nil
	}
	events, err := warningEvents(ctx, r, u)
	if err != nil {
		return Cause{}, err
	}
	return eventCause(events), nil
}

// workloadPodsCause is the cause the pods of a workload state, or the volume
// a stuck pod waits on.
func workloadPodsCause(ctx context.Context, r client.Reader, u *unstructured.Unstructured, now time.Time) (Cause, error) {
	sel, ok := podSelector(u)
	if !ok {
		return Cause{}, nil
	}
	pods, err := listPods(ctx, r, u.GetNamespace(), sel)
	if err != nil {
		return Cause{}, err
	}
	c, stuck := podsCause(pods, now)
	if c.known() || stuck == nil {
		return c, nil
	}
	events, err := warningEvents(ctx, r, stuck)
	if err != nil {
		return Cause{}, err
	}
	return volumeCause(stuck.Name, events), nil
}

// shortOfPods tells whether a StatefulSet or DaemonSet has fewer pods than it
// wants: its controller may have failed to create them (a FailedCreate event).
func shortOfPods(u *unstructured.Unstructured) bool {
	n := func(path ...string) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, path...)
		return v
	}
	if u.GetKind() == "DaemonSet" {
		return n("status", "currentNumberScheduled") < n("status", "desiredNumberScheduled")
	}
	return n("status", "replicas") < specReplicas(u)
}

func listPods(ctx context.Context, r client.Reader, namespace string, sel labels.Selector) ([]corev1.Pod, error) {
	if reqs, selectable := sel.Requirements(); !selectable || len(reqs) == 0 {
		return nil, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingLabelsSelector{Selector: sel}, client.Limit(maxPodsListed)); err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", sel, err)
	}
	return pods.Items, nil
}

// warningEvents lists the Warning events of obj.
func warningEvents(ctx context.Context, r client.Reader, obj client.Object) ([]corev1.Event, error) {
	return objectEvents(ctx, r, obj, corev1.EventTypeWarning)
}

// objectEvents lists the core/v1 events whose involved object is obj (by
// UID), of type typ when it is not empty.
func objectEvents(ctx context.Context, r client.Reader, obj client.Object, typ string) ([]corev1.Event, error) {
	if obj.GetUID() == "" {
		return nil, nil
	}
	set := fields.Set{"involvedObject.uid": string(obj.GetUID())}
	if typ != "" {
		set["type"] = typ
	}
	var events corev1.EventList
	if err := r.List(ctx, &events, client.InNamespace(obj.GetNamespace()),
		client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(set)}, client.Limit(maxEventsListed)); err != nil {
		return nil, fmt.Errorf("listing the events of %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	return events.Items, nil
}
