package dependents

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var cmGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func cm(rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", ResourceVersion: rv}}
}

func TestTrackerKnowsWhatWasRead(t *testing.T) {
	tr := NewTracker()
	if tr.known(cmGVK, cm("5")) {
		t.Error("a version nobody read is known")
	}
	tr.Saw(cmGVK, cm("5"))
	tr.Saw(cmGVK, cm("3")) // an older read never lowers what was seen
	for rv, want := range map[string]bool{"4": true, "5": true, "6": false, "10": false, "x": false} {
		if got := tr.known(cmGVK, cm(rv)); got != want {
			t.Errorf("known(%s) = %v, want %v", rv, got, want)
		}
	}
	for rv, want := range map[string]bool{"4": true, "5": false, "6": false, "x": true} {
		if got := tr.stale(cmGVK, cm(rv)); got != want {
			t.Errorf("stale(%s) = %v, want %v", rv, got, want)
		}
	}
	tr.forget(cmGVK, cm(""))
	if tr.known(cmGVK, cm("5")) {
		t.Error("a deleted object is still known")
	}
}

func TestTrackerHoldsEventsDuringAReconcile(t *testing.T) {
	owner := schema.GroupKind{Group: "test.helmapp.io", Kind: "Widget"}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "w"}}
	run := func(eventRV, readRV string) int {
		tr := NewTracker()
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		if tr.hold(owner, req, q, keyOf(cmGVK, cm(eventRV)), eventRV) {
			t.Fatal("an event was held for a resource nobody reconciles")
		}
		tr.Begin(owner, req)
		if !tr.hold(owner, req, q, keyOf(cmGVK, cm(eventRV)), eventRV) {
			t.Fatal("an event was not held during its owner's reconcile")
		}
		if readRV != "" {
			tr.Saw(cmGVK, cm(readRV))
		}
		tr.End(owner, req)
		return q.Len()
	}
	if n := run("7", "7"); n != 0 {
		t.Errorf("the reconcile read the version the event carried, yet %d reconcile(s) were queued", n)
	}
	if n := run("8", "7"); n != 1 {
		t.Errorf("the reconcile read an older version than the event's, yet %d reconcile(s) were queued, want 1", n)
	}
	if n := run("7", ""); n != 1 {
		t.Errorf("the reconcile read nothing, yet %d reconcile(s) were queued, want 1", n)
	}
}
