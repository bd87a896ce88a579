package reconciler

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// A change not yet in the status waits settleWindow from its last change;
// inputs the status describes wait for nothing; a change within the window
// restarts it.
func TestSettlerWaitsForTheLastChange(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetUID(types.UID("u1"))
	obj.SetGeneration(2)
	src := func(rv string) []status.ValuesSource {
		return []status.ValuesSource{{Kind: "Secret", Name: "db", ValuesKey: "values.yaml", ResourceVersion: rv, Found: true}}
	}
	described := status.Status{ObservedGeneration: 2, ValuesSources: src("10")}
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var s settler

	if w := s.wait(obj, described, src("10"), t0); w != 0 {
		t.Errorf("inputs the status describes wait %s, want 0", w)
	}
	// The Secret changed: a full window.
	if w := s.wait(obj, described, src("11"), t0); w != settleWindow {
		t.Errorf("a new Secret version waits %s, want %s", w, settleWindow)
	}
	if w := s.wait(obj, described, src("11"), t0.Add(settleWindow/2)); w != settleWindow/2 {
		t.Errorf("half-way waits %s, want %s", w, settleWindow/2)
	}
	// The spec changes within the window: the window restarts.
	obj.SetGeneration(3)
	at := t0.Add(settleWindow * 3 / 4)
	if w := s.wait(obj, described, src("11"), at); w != settleWindow {
		t.Errorf("a new generation within the window waits %s, want a new window %s", w, settleWindow)
	}
	if w := s.wait(obj, described, src("11"), at.Add(settleWindow)); w != 0 {
		t.Errorf("after a quiet window it waits %s, want 0", w)
	}
}
