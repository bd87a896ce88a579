package reconciler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// preemptTimeout is the Hooked watch's timeout in the preemption tests: the
// default action timeout, which a fix would wait out without preemption.
const preemptTimeout = "5m"

// waitHeld waits until the hook Job of release name exists and Helm's
// history ends with a revision of status st: the action is held in its hook.
func (e *env) waitHeld(name string, st release.Status) {
	e.t.Helper()
	tu.Eventually(e.t, time.Minute, "the action to be held in its hook", func() (bool, string) {
		err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name + "-wait"}, &batchv1.Job{})
		got := statuses(history(e.t, e.ns, name))
		return err == nil && len(got) > 0 && got[len(got)-1] == st, fmt.Sprintf("job: %v, history %s", err, fmtStatuses(got))
	})
}

// preempted checks what a fix that preempted the action of generation from
// leaves: Ready soon after the fix, one deployed revision and none pending,
// the preempted revision failed in helm history with a description naming
// the newer generation, the failedRelease and an ActionSuperseded event
// naming both generations, and a status that said so while it happened.
func (e *env) preempted(name string, from int64, revision int, seen func() []*unstructured.Unstructured) {
	e.t.Helper()
	to := from + 1
	u := e.waitSoon(hookedGVK, name, "the fix to be deployed at once", func(u *unstructured.Unstructured) bool {
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, "") && og == to
	})
	expect(e.t, u)
	consistentHistory(e.t, e.ns, name, u)

	// helm history, as the CLI shows it.
	out, err := cp.Helm(context.Background(), "history", name, "-n", e.ns, "-o", "json")
	if err != nil {
		e.t.Fatal(err)
	}
	var hist []struct {
		Revision    int    `json:"revision"`
		Status      string `json:"status"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(out), &hist); err != nil {
		e.t.Fatalf("helm history -o json: %v: %s", err, out)
	}
	found := false
	for _, h := range hist {
		if h.Revision == revision {
			found = true
			// Failed, and superseded once the fix deployed over it.
			if (h.Status != "failed" && h.Status != "superseded") || !strings.Contains(h.Description, fmt.Sprintf("superseded by generation %d", to)) {
				e.t.Errorf("helm history shows revision %d %s %q; want it failed, its description saying it was superseded by generation %d",
					revision, h.Status, h.Description, to)
			}
		}
	}
	if !found {
		e.t.Errorf("helm history %s lacks the preempted revision %d", out, revision)
	}

	story := fmt.Sprintf("superseded by generation %d", to)
	if msg := fmt.Sprint(nested(u, "status", "failedRelease", "message")); !strings.Contains(msg, story) ||
		nested(u, "status", "failedRelease", "revision") != int64(revision) {
		e.t.Errorf("failedRelease %v does not tell that revision %d was %s", nested(u, "status", "failedRelease"), revision, story)
	}
	told := false
	for _, s := range seen() {
		if strings.Contains(conditionMessage(s, status.TypeReleaseFailed), story) {
			told = true
		}
	}
	if !told {
		e.t.Errorf("no status said ReleaseFailed %q", story)
	}
	ev := e.waitEvent(u, corev1.EventTypeNormal, reconciler.EventActionSuperseded)
	for _, want := range []string{fmt.Sprintf("Generation %d", to), fmt.Sprintf("generation %d", from), "hook"} {
		if !strings.Contains(ev.Message, want) {
			e.t.Errorf("ActionSuperseded event %q lacks %q", ev.Message, want)
		}
	}
	// The objects are the fix's.
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &corev1.ConfigMap{}); err != nil {
		e.t.Errorf("the release's ConfigMap: %v", err)
	}
}

// A fix lands at once: an install held by a hook that never completes is
// preempted when the spec is fixed (the hook removed), Helm records it
// failed as superseded, and the fix is installed over it.
func TestFixPreemptsAHungInstall(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = preemptTimeout
	e.start()
	seen := e.recordStatuses(hookedGVK, "h")
	e.create(hookedGVK, "h", map[string]any{"block": true})
	e.waitHeld("h", release.StatusPendingInstall)

	e.patchSpec(hookedGVK, "h", map[string]any{"block": false})
	e.preempted("h", 1, 1, seen)
}

// The same for an upgrade held by its hook: the previous revision stays
// deployed until the fix supersedes it.
func TestFixPreemptsAHungUpgrade(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = preemptTimeout
	e.start()
	e.create(hookedGVK, "u", map[string]any{})
	e.wait(hookedGVK, "u", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	seen := e.recordStatuses(hookedGVK, "u")
	e.patchSpec(hookedGVK, "u", map[string]any{"block": true})
	e.waitHeld("u", release.StatusPendingUpgrade)

	e.patchSpec(hookedGVK, "u", map[string]any{"block": false, "data": map[string]any{"greeting": "fixed"}})
	e.preempted("u", 2, 2, seen)
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "u"}, cm); err != nil || cm.Data["greeting"] != "fixed" {
		t.Errorf("the fix's values are not deployed: %v %v", cm.Data, err)
	}
	if got := statuses(history(t, e.ns, "u")); !slices.Equal(got, []release.Status{release.StatusSuperseded, release.StatusFailed, release.StatusDeployed}) {
		t.Errorf("Helm's history is %s, want superseded, failed, deployed", fmtStatuses(got))
	}
}

// An operator restarted after a kill finds the lock the killed one left,
// unlocks it and runs the old spec again, held in its hook; the fix that
// arrives a moment later preempts that action too.
func TestFixPreemptsTheOldSpecAfterARestart(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = preemptTimeout
	// What a killed operator leaves: a pending install nobody runs, written
	// before the new operator's tenure, so that it is stale.
	e.writeRecord(pendingRecordOf(t, "hooked", e.ns, "h", 1, release.StatusPendingInstall))
	seen := e.recordStatuses(hookedGVK, "h")
	e.create(hookedGVK, "h", map[string]any{"block": true})
	e.start()
	e.waitHeld("h", release.StatusPendingUpgrade) // the old spec, over the unlocked revision 1

	e.patchSpec(hookedGVK, "h", map[string]any{"block": false})
	e.preempted("h", 1, 2, seen)
}
