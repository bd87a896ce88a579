package reconciler_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// oneAttempt makes every failure wait longer than the test before a retry.
func oneAttempt(c *operator.Config) { c.RetryBase, c.RetryMax = 10*time.Minute, 10*time.Minute }

// A hook Job that never completes fails the install, and then an upgrade,
// after the watch's timeout, with a message naming the hook; Helm records
// each attempt failed, not pending.
func TestHookThatNeverCompletesFailsTheAction(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = "3s"
	e.start(oneAttempt)

	cr := e.create(hookedGVK, "h", map[string]any{"block": true})
	u := e.wait(hookedGVK, "h", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	expect(t, u, "Ready=False/InstallError", "Deployed=False/NotDeployed")
	want := "Install of release h failed: hook h-wait (pre-install Job) did not complete within 3s"
	if msg := conditionMessage(u, status.TypeReleaseFailed); msg != want {
		t.Errorf("ReleaseFailed message %q, want %q", msg, want)
	}
	if ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventInstallFailed); !strings.Contains(ev.Message, "hook h-wait") {
		t.Errorf("InstallFailed event %q does not name the hook", ev.Message)
	}
	if got := statuses(history(t, e.ns, "h")); !slices.Equal(got, []release.Status{release.StatusFailed}) {
		t.Errorf("Helm's history %v, want the install recorded failed", got)
	}
	job := &batchv1.Job{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "h-wait"}, job); err != nil {
		t.Errorf("the hook Job the test relies on: %v", err)
	}

	// Deployed without the hook, then upgraded with it.
	e.create(hookedGVK, "u", map[string]any{})
	e.wait(hookedGVK, "u", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.patchSpec(hookedGVK, "u", map[string]any{"block": true})
	u = e.wait(hookedGVK, "u", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	want = "Upgrade of release u to revision 2 failed: hook u-wait (pre-upgrade Job) did not complete within 3s"
	if msg := conditionMessage(u, status.TypeReleaseFailed); msg != want {
		t.Errorf("ReleaseFailed message %q, want %q", msg, want)
	}
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("deployedRelease.revision = %v, want 1", rev)
	}
	if got := statuses(history(t, e.ns, "u")); !slices.Equal(got, []release.Status{release.StatusDeployed, release.StatusFailed}) {
		t.Errorf("Helm's history %v, want revision 1 deployed and the upgrade recorded failed", got)
	}
}

// A pending install left by an earlier process (written before this one
// started) is unlocked at once and installed again in the same reconcile.
func TestStalePendingInstallIsUnlocked(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.writeRecord(pendingRecord(t, e.ns, "g", 1, release.StatusPendingInstall))
	e.start()

	cr := e.create(gadgetGVK, "g", map[string]any{})
	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventReleaseUnlocked)
	for _, want := range []string{"revision 1 was left pending-install", "written before this operator began reconciling", "marked failed"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("ReleaseUnlocked event %q does not say %q", ev.Message, want)
		}
	}
	u := e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Deployed=True/", "Irreconcilable=False/ReconcileSuccessful")
	// Revision 1, marked failed, was installed over (an upgrade, which marks
	// the revision it replaces superseded).
	h := consistentHistory(t, e.ns, "g", u)
	if got := statuses(h); !slices.Equal(got, []release.Status{release.StatusSuperseded, release.StatusDeployed}) ||
		!strings.Contains(h[0].Info.Description, "Unlocked by helm-app-operator") {
		t.Errorf("Helm's history %v, revision 1 %q: want revision 1 unlocked and installed over by revision 2", got, h[0].Info.Description)
	}
}

// A pending upgrade left by an earlier process is unlocked and upgraded
// over; the last deployed revision stays deployed until the new one is.
func TestStalePendingUpgradeIsUnlocked(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	stop := e.start()
	cr := e.create(gadgetGVK, "g", map[string]any{})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	stop()

	e.writeRecord(pendingRecord(t, e.ns, "g", 2, release.StatusPendingUpgrade))
	e.patchSpec(gadgetGVK, "g", map[string]any{"data": map[string]any{"greeting": "hi"}})
	e.start()

	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventReleaseUnlocked)
	if !strings.Contains(ev.Message, "revision 2 was left pending-upgrade") {
		t.Errorf("ReleaseUnlocked event %q", ev.Message)
	}
	u := e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	h := consistentHistory(t, e.ns, "g", u)
	if got := statuses(h); !slices.Equal(got, []release.Status{release.StatusSuperseded, release.StatusFailed, release.StatusDeployed}) {
		t.Errorf("Helm's history %v, want 1 superseded, 2 failed (unlocked), 3 deployed", got)
	}
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "g"}, cm); err != nil || cm.Data["greeting"] != "hi" {
		t.Errorf("the upgrade over the unlocked revision did not apply the new spec: %v %v", cm.Data, err)
	}
}

// A pending lock written while this process reconciles, by no action of
// its own, may belong to an operation still running elsewhere: it is shown
// as ReleaseLocked, with its age and when it will be unlocked, and is
// unlocked once older than the watch's timeout.
func TestYoungLockWaitsForTheTimeout(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = "8s"
	e.start()
	// Once the operator reconciles, its tenure has begun: a lock written now
	// is not stale by it.
	e.create(gadgetGVK, "probe", map[string]any{})
	e.wait(gadgetGVK, "probe", status.TypeReady, metav1.ConditionTrue, "")
	e.writeRecord(pendingRecordOf(t, "hooked", e.ns, "h", 1, release.StatusPendingInstall))

	cr := e.create(hookedGVK, "h", map[string]any{})
	u := e.wait(hookedGVK, "h", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonReleaseLocked)
	expect(t, u, "Ready=False/ReleaseLocked", "Deployed=False/NotDeployed")
	msg := conditionMessage(u, status.TypeIrreconcilable)
	for _, want := range []string{"Release h revision 1 is locked in pending-install", "ago", "it is unlocked at", "older than the watch's timeout 8s"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Irreconcilable message %q does not say %q", msg, want)
		}
	}
	if got := statuses(history(t, e.ns, "h")); !slices.Equal(got, []release.Status{release.StatusPendingInstall}) {
		t.Errorf("the young lock was touched: history %v", got)
	}

	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventReleaseUnlocked)
	u = e.wait(hookedGVK, "h", status.TypeReady, metav1.ConditionTrue, "")
	consistentHistory(t, e.ns, "h", u)
}

// Stopping the operator while an install is held in a hook cancels the
// install after the shutdown grace, and Helm records it failed, not
// pending; the next operator installs it.
func TestShutdownCancelsARunningInstall(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = "10m"
	stop := e.start(func(c *operator.Config) { c.ShutdownGrace = time.Second })

	e.create(hookedGVK, "h", map[string]any{"block": true})
	tu.Eventually(t, time.Minute, "the install to be held in its hook", func() (bool, string) {
		job := &batchv1.Job{}
		err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "h-wait"}, job)
		got := statuses(history(t, e.ns, "h"))
		return err == nil && slices.Equal(got, []release.Status{release.StatusPendingInstall}), "history " + fmtStatuses(got)
	})
	stop()

	h := history(t, e.ns, "h")
	if got := statuses(h); !slices.Equal(got, []release.Status{release.StatusFailed}) {
		t.Fatalf("after the shutdown Helm's history is %v, want the install recorded failed", got)
	}
	if d := h[0].Info.Description; !strings.Contains(d, "context canceled") {
		t.Errorf("revision 1's description %q does not say the install was cancelled", d)
	}
	// The status, written as the operator stopped, says so.
	u := e.get(hookedGVK, "h")
	expect(t, u, "ReleaseFailed=True/InstallError")
	if msg := conditionMessage(u, status.TypeReleaseFailed); !strings.Contains(msg, "hook h-wait (pre-install Job) had not completed when the action was cancelled") {
		t.Errorf("ReleaseFailed message %q does not name the cancelled hook", msg)
	}

	e.patchSpec(hookedGVK, "h", map[string]any{"block": false})
	e.start()
	u = e.wait(hookedGVK, "h", status.TypeReady, metav1.ConditionTrue, "")
	consistentHistory(t, e.ns, "h", u)
}

// pendingRecord is a release record as an install or upgrade that never
// finished leaves it, written now: the gadget chart (any chart will do), no
// values, no manifest.
func pendingRecord(t *testing.T, ns, name string, version int, st release.Status) *release.Release {
	return pendingRecordOf(t, "gadget", ns, name, version, st)
}

// pendingRecordOf is pendingRecord of the test chart chartName: a record
// with no owner labels is the resource's to adopt only when it is of the
// resource's chart.
func pendingRecordOf(t *testing.T, chartName, ns, name string, version int, st release.Status) *release.Release {
	t.Helper()
	chrt, err := loader.Load(filepath.Join("testdata", "charts", chartName))
	if err != nil {
		t.Fatal(err)
	}
	now := helmtime.Now()
	return &release.Release{Name: name, Namespace: ns, Version: version, Chart: chrt, Config: map[string]any{},
		Info: &release.Info{Status: st, FirstDeployed: now, LastDeployed: now, Description: "Initial install underway"}}
}

// writeRecord writes rel with Helm's own storage, as Helm does.
func (e *env) writeRecord(rel *release.Release) {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(e.ns))).Create(rel); err != nil {
		e.t.Fatalf("writing release %s revision %d: %v", rel.Name, rel.Version, err)
	}
}

// consistentHistory checks what every recovery must leave: exactly one
// deployed revision, none pending, and the status' deployedRelease naming
// it. It returns the history, oldest first.
func consistentHistory(t *testing.T, ns, name string, u *unstructured.Unstructured) []*release.Release {
	t.Helper()
	h := history(t, ns, name)
	deployed := 0
	for _, r := range h {
		switch {
		case r.Info.Status == release.StatusDeployed:
			deployed++
			if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(r.Version) {
				t.Errorf("deployedRelease.revision %v, Helm's deployed revision %d", rev, r.Version)
			}
		case r.Info.Status.IsPending():
			t.Errorf("revision %d is still %s", r.Version, r.Info.Status)
		}
	}
	if deployed != 1 {
		t.Errorf("Helm's history %v has %d deployed revisions, want exactly one", statuses(h), deployed)
	}
	return h
}

func fmtStatuses(s []release.Status) string {
	parts := make([]string, len(s))
	for i, st := range s {
		parts[i] = st.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// statuses lists the revisions' statuses, oldest first.
func statuses(h []*release.Release) []release.Status {
	out := make([]release.Status, len(h))
	for i, r := range h {
		out[i] = r.Info.Status
	}
	return out
}
