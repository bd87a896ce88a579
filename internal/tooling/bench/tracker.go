package bench

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// benchGVR is the benchmark's kind (hack/bench/testdata/crd).
var benchGVR = schema.GroupVersionResource{Group: "bench.helmapp.io", Version: "v1alpha1", Resource: benchResource}

// tracker watches the benchmark's resources as the admin and records, per
// resource, when each condition was first seen True and when it last changed.
type tracker struct {
	mu      sync.Mutex
	objs    map[string]*unstructured.Unstructured
	updated map[string]time.Time
	first   map[string]map[string]time.Time // condition type -> name -> time
	changed chan struct{}
}

func startTracker(ctx context.Context, dyn dynamic.Interface, namespace string) (*tracker, error) {
	t := &tracker{objs: map[string]*unstructured.Unstructured{}, updated: map[string]time.Time{},
		first: map[string]map[string]time.Time{}, changed: make(chan struct{})}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	inf := f.ForResource(benchGVR).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return t, nil
}

func (t *tracker) observe(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	name := u.GetName()
	t.objs[name] = u
	t.updated[name] = now
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		if st, _ := m["status"].(string); st != "True" || typ == "" {
			continue
		}
		if t.first[typ] == nil {
			t.first[typ] = map[string]time.Time{}
		}
		if _, seen := t.first[typ][name]; !seen {
			t.first[typ][name] = now
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// countTrue is how many resources have shown condition True, and when the
// last of them first did.
func (t *tracker) countTrue(cond string) (int, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, at := range t.first[cond] {
		if at.After(last) {
			last = at
		}
	}
	return len(t.first[cond]), last
}

// waitFor blocks until done holds for the named resource's latest state and
// returns when that state was observed.
func (t *tracker) waitFor(ctx context.Context, name string, done func(*unstructured.Unstructured) bool) (time.Time, error) {
	for {
		t.mu.Lock()
		obj, at, ch := t.objs[name], t.updated[name], t.changed
		t.mu.Unlock()
		if obj != nil && done(obj) {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-ch:
		}
	}
}

// waitUntil blocks until cond holds, calling it after every change and at
// least every tick.
func (t *tracker) waitUntil(ctx context.Context, tick time.Duration, cond func() bool) error {
	for {
		t.mu.Lock()
		ch := t.changed
		t.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-time.After(tick):
		}
	}
}

// conditionTrue reports whether obj has condition typ True, and for gen > 0
// whether that condition describes generation gen or later.
func conditionTrue(obj *unstructured.Unstructured, typ string, gen int64) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		if m["status"] != "True" {
			return false
		}
		if gen <= 0 {
			return true
		}
		og, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		return og >= gen
	}
	return false
}

// manifestHas reports whether the deployed release in obj's status (the
// baseline's deployedRelease.manifest) contains marker.
func manifestHas(obj *unstructured.Unstructured, marker string) bool {
	m, _, _ := unstructured.NestedString(obj.Object, "status", "deployedRelease", "manifest")
	return strings.Contains(m, marker)
}
