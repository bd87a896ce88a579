package readiness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

const psa = `would violate PodSecurity "restricted:latest": privileged (container "web" must not set securityContext.privileged=true)`

func TestWarningsKeepTheLatestWrite(t *testing.T) {
	w := NewWarnings()
	owner := types.UID("owner")
	dep := ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	obj := WarnedObject{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "web"}

	w.Record(owner, obj, []string{psa, psa, "a\n  second", "third", "fourth"})
	if got := w.Of(owner, dep); len(got) != maxObjectWarnings || got[0] != psa || got[1] != "a second" {
		t.Errorf("kept %q, want the first %d distinct warnings on one line", got, maxObjectWarnings)
	}
	if got := w.Of("other", dep); got != nil {
		t.Errorf("another owner sees %q", got)
	}
	fresh := w.Take(owner)
	if len(fresh) != maxObjectWarnings || fresh[0] != (Warning{Object: obj, Text: psa}) {
		t.Errorf("took %v", fresh)
	}
	if again := w.Take(owner); again != nil {
		t.Errorf("took %v twice", again)
	}
	if !w.Has(owner) || len(w.Of(owner, dep)) == 0 {
		t.Error("taking the fresh warnings dropped the object's")
	}

	// A write without a warning clears the object's.
	w.Record(owner, obj, nil)
	if w.Has(owner) {
		t.Errorf("a write without warnings left %q", w.Of(owner, dep))
	}

	// Bounded: the text, and the objects of one owner.
	w.Record(owner, obj, []string{strings.Repeat("x", 10*maxWarningLength)})
	if got := w.Of(owner, dep); len(got[0]) > maxWarningLength {
		t.Errorf("a warning of %d bytes kept", len(got[0]))
	}
	for i := range 2 * maxWarnedObjects {
		w.Record(owner, WarnedObject{Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprint(i)}, []string{"deprecated"})
	}
	if n := len(w.owners[owner].objects); n != maxWarnedObjects {
		t.Errorf("%d objects kept, want %d", n, maxWarnedObjects)
	}
	if n := len(w.Take(owner)); n > maxFreshWarnings {
		t.Errorf("%d fresh warnings kept, want at most %d", n, maxFreshWarnings)
	}

	// Objects no longer in the release, and Current ones, are forgotten.
	w.Retain(owner, []ObjectRef{dep})
	if n := len(w.owners[owner].objects); n != 1 {
		t.Errorf("%d objects kept after Retain, want 1", n)
	}
	w.forget(owner, dep)
	if w.Has(owner) {
		t.Error("a Current object's warnings stayed")
	}
	w.Forget(owner)
	var none *Warnings
	none.Record(owner, obj, []string{psa})
	if none.Has(owner) || none.Of(owner, dep) != nil || none.Take(owner) != nil {
		t.Error("a nil store keeps something")
	}
}

// TestWarningCauseOrder: a workload's own ReplicaFailure comes before the
// API server's warning, which comes before everything else; no request is
// made for either (the reader is nil).
func TestWarningCauseOrder(t *testing.T) {
	warned := []string{psa}
	want := Cause{status.ReasonAPIWarning, "API server warning on apply: " + status.Foreign(psa)}
	failed := withConditions("Deployment", map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "forbidden"})
	if got, err := causeOf(context.Background(), nil, failed, kstatus.InProgressStatus, causeNow, warned); err != nil || got.Reason != status.ReasonFailedCreate {
		t.Errorf("a Deployment's ReplicaFailure gave %v, %v", got, err)
	}
	if got, err := causeOf(context.Background(), nil, withConditions("Deployment"), kstatus.InProgressStatus, causeNow, warned); err != nil || got != want {
		t.Errorf("a Deployment with a warning gave %v, %v; want %v", got, err, want)
	}
	if got, err := causeOf(context.Background(), nil, obj("v1", "PersistentVolumeClaim", nil), kstatus.InProgressStatus, causeNow, warned); err != nil || got != want {
		t.Errorf("a claim with a warning gave %v, %v; want %v", got, err, want)
	}
}
