package release

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// explain says how live drifted from want, field by field with the writer
// of each from live's managedFields, drops the fields the kind's drift
// policy ignores, and returns the write that restores the rest (nil when
// nothing is left).
//
// The operator's caches keep no managedFields: an object read from one is
// read once more, live (Live), and compared again, since the server may
// hold a newer version than the cache. What that found is remembered per
// object version and revision (DriftMemo), so drift left standing (warn
// mode, an ignored difference) costs one read, not one per reconcile; an
// object that did not drift costs none.
func (r *Runner) explain(ctx context.Context, want, live *unstructured.Unstructured, revision int) (*restoration, error) {
	key := driftKey{uid: live.GetUID(), version: live.GetResourceVersion(),
		release: r.Namespace + "/" + r.Name, revision: revision}
	cached := len(live.GetManagedFields()) == 0
	if cached {
		if w, ok := r.DriftMemo.get(key); ok {
			return w, nil
		}
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(live.GroupVersionKind())
		reader := r.Live
		if reader == nil {
			reader = r.KubeReader
		}
		// A failed read leaves the fields named without their writers.
		if err := reader.Get(ctx, client.ObjectKeyFromObject(live), fresh); err == nil && ownedBy(fresh, r.Name, r.Namespace) {
			live = fresh
		}
	}
	w, err := r.restoration(want, live)
	if err != nil {
		return nil, err
	}
	if cached {
		r.DriftMemo.put(key, w)
	}
	return w, nil
}

// restoration compares live with want and returns the patch that restores
// what drifted and the policy does not ignore, nil for none.
func (r *Runner) restoration(want, live *unstructured.Unstructured) (*restoration, error) {
	name := want.GetKind() + " " + want.GetName()
	patch, err := driftPatch(want, live)
	if err != nil || patch == nil {
		return nil, err
	}
	data, err := patch.Data(live)
	if err != nil {
		return nil, err
	}
	fields, err := driftFields(data, patch.Type() == types.StrategicMergePatchType, live)
	if err != nil {
		return nil, err
	}
	found := driftedObject(want)
	var ignored []driftField
	now := metav1.NewTime(r.now().Truncate(time.Second)) // as managedFields' times
	for _, f := range fields {
		a := actorOf(f, live.GetManagedFields())
		if a.Manager != "" && a.Time == nil {
			// Kubernetes records no time in the entry of a write through
			// the scale subresource: when the drift was found is the
			// nearest known.
			a.Time, a.TimeObserved = &now, true
		}
		if r.Drift.ignores(found, a) {
			ignored = append(ignored, f)
			continue
		}
		found.Fields = append(found.Fields, a)
	}
	if len(ignored) > 0 {
		left, ok, err := withoutFields(data, ignored)
		if err != nil || !ok {
			return nil, err
		}
		patch = client.RawPatch(patch.Type(), left)
	}
	obj := live.DeepCopy()
	obj.SetManagedFields(nil)
	return &restoration{verb: "patch", obj: obj, patch: patch, name: name, found: found}, nil
}

// driftedObject names u for status.drift.
func driftedObject(u *unstructured.Unstructured) status.DriftedObject {
	return status.DriftedObject{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// DriftMemo remembers, per object version and release revision, what
// explaining a drifted object found: the restoration, or none (the drift
// was ignored, or the cache was behind). It holds at most maxDriftMemo
// entries, and starts afresh when full.
type DriftMemo struct {
	mu sync.Mutex
	m  map[driftKey]*restoration
}

type driftKey struct {
	uid      types.UID
	version  string
	release  string
	revision int
}

const maxDriftMemo = 4096

// NewDriftMemo returns an empty memo.
func NewDriftMemo() *DriftMemo { return &DriftMemo{m: map[driftKey]*restoration{}} }

func (m *DriftMemo) get(k driftKey) (*restoration, bool) {
	if m == nil || k.uid == "" {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.m[k]
	if ok && w != nil {
		// The write decodes the server's answer into obj: each use its own.
		c := *w
		c.obj = w.obj.DeepCopy()
		w = &c
	}
	return w, ok
}

func (m *DriftMemo) put(k driftKey, w *restoration) {
	if m == nil || k.uid == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxDriftMemo {
		m.m = map[driftKey]*restoration{}
	}
	if w != nil {
		c := *w
		c.obj = w.obj.DeepCopy()
		w = &c
	}
	m.m[k] = w
}
