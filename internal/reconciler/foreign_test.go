package reconciler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// soon is how long "within seconds" may take on a loaded machine: far less
// than any wait the operator could be stuck in (a lock's timeout, a 10-minute
// backoff, a one-hour reconcile period).
const soon = time.Minute

// quiet makes only watches reconcile (no periodic resync within a test) and
// every failure wait longer than the test before its retry.
func quiet(c *operator.Config) {
	c.ReconcilePeriod = time.Hour
	oneAttempt(c)
}

// page is the title the release's ConfigMap serves.
func (e *env) page(name string) string {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, cm); err != nil {
		e.t.Fatal(err)
	}
	for _, v := range cm.Data {
		if i := strings.Index(v, "<title>"); i >= 0 {
			rest := v[i+len("<title>"):]
			return rest[:strings.Index(rest, "</title>")]
		}
	}
	return ""
}

func revisionIs(rev int64, reason string) func(u *unstructured.Unstructured) bool {
	return func(u *unstructured.Unstructured) bool {
		return nested(u, "status", "deployedRelease", "revision") == rev &&
			tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, reason)
	}
}

// waitSoon is waitStatus within soon.
func (e *env) waitSoon(gvk schema.GroupVersionKind, name, what string, ok func(u *unstructured.Unstructured) bool) *unstructured.Unstructured {
	e.t.Helper()
	var u *unstructured.Unstructured
	tu.Eventually(e.t, soon, what, func() (bool, string) {
		u = e.get(gvk, name)
		return ok(u), tu.Describe(u)
	})
	return u
}

// undoneByTheOperator checks what a revision written by hand leaves once the
// operator has undone it: a ForeignRevision event naming it and Helm's
// description, the status naming it while it was deployed and then the
// revision Helm has deployed now, the spec's values in the objects, one
// deployed revision, and no ReleaseLocked.
func (e *env) undoneByTheOperator(cr *unstructured.Unstructured, statuses func() []*unstructured.Unstructured, foreign int64, description, title string) {
	e.t.Helper()
	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventForeignRevision)
	for _, want := range []string{fmt.Sprintf("Release web revision %d (deployed", foreign), description, "written by someone else", "upgrading it back"} {
		if !strings.Contains(ev.Message, want) {
			e.t.Errorf("ForeignRevision event %q does not say %q", ev.Message, want)
		}
	}
	u := e.waitSoon(tu.NginxGVK, "web", "the operator's upgrade over the foreign revision", revisionIs(foreign+1, status.ReasonUpgradeSuccessful))
	expect(e.t, u, "Deployed=True/UpgradeSuccessful", "Stalled=False/NotStalled", "Irreconcilable=False/ReconcileSuccessful")
	for _, typ := range []string{status.TypeReady, status.TypeReconciling, status.TypeStalled, status.TypeIrreconcilable, status.TypeReleaseFailed} {
		if c := tu.Condition(u, typ); c != nil && c.Reason == status.ReasonReleaseLocked {
			e.t.Errorf("condition %s still says ReleaseLocked after the CLI returned: %s", c.Type, c.Message)
		}
	}
	h := consistentHistory(e.t, e.ns, "web", u)
	if got := h[len(h)-1]; got.Version != int(foreign+1) || got.Labels[rel.LabelOwnerUID] != string(cr.GetUID()) {
		e.t.Errorf("latest revision %d, owner %q: want the operator's upgrade at %d", got.Version, got.Labels[rel.LabelOwnerUID], foreign+1)
	}
	if got := e.page("web"); got != title {
		e.t.Errorf("the ConfigMap serves %q, want the spec's %q", got, title)
	}
	named := false
	for _, s := range statuses() {
		named = named || nested(s, "status", "deployedRelease", "revision") == foreign
	}
	if !named {
		e.t.Errorf("no status named revision %d, which Helm had deployed", foreign)
	}
}

// `helm upgrade --set` by hand: within seconds the status names the CLI's
// revision, a ForeignRevision event says who wrote it, the release is
// upgraded back to the spec, and nothing says ReleaseLocked once the CLI has
// returned (the CLI's revision is pending for a moment, and the operator may
// see it so).
func TestHelmUpgradeByHandIsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "From the spec"}})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	statuses := e.recordStatuses(tu.NginxGVK, "web")

	e.helm("upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"), "--reuse-values", "--set", "page.title=By hand")
	e.undoneByTheOperator(cr, statuses, 2, `Helm's description "Upgrade complete"`, "From the spec")
}

// `helm rollback` by hand: the same.
func TestHelmRollbackByHandIsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "First"}})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "Second"}})
	e.waitStatus(tu.NginxGVK, "web", "the upgrade to revision 2", revisionIs(2, status.ReasonUpgradeSuccessful))
	statuses := e.recordStatuses(tu.NginxGVK, "web")

	e.helm("rollback", "web", "1")
	e.undoneByTheOperator(cr, statuses, 3, `Helm's description "Rollback to 1"`, "Second")
}

// A revision written by hand that changes nothing the resource decides (the
// same chart, the same values) is adopted quietly: no upgrade, no event,
// and the status names it.
func TestSameRevisionByHandIsAdoptedQuietly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "Same"}})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	e.helm("upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"), "--reuse-values")
	u := e.waitSoon(tu.NginxGVK, "web", "the status to name the CLI's revision", func(u *unstructured.Unstructured) bool {
		return nested(u, "status", "deployedRelease", "revision") == int64(2)
	})
	e.settle(tu.NginxGVK, "web")
	u = e.get(tu.NginxGVK, "web")
	expect(t, u, "Ready=True/", "Deployed=True/")
	if h := consistentHistory(t, e.ns, "web", u); len(h) != 2 {
		t.Errorf("Helm's history has %d revisions: the same revision was upgraded over", len(h))
	}
	if n := e.countEvents(cr, reconciler.EventForeignRevision); n != 0 {
		t.Errorf("%d ForeignRevision events for a revision that changed nothing", n)
	}
}

// `helm uninstall` by hand while the resource backs off after a failure: it
// is installed again within seconds, not when the backoff ends.
func TestHelmUninstallDuringABackoffReinstalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	// Upgrades to more than 5 replicas are denied; installs are not.
	e.policy("big-updates", []admissionv1.NamedRuleWithOperations{rule("apps", "deployments", admissionv1.Update)},
		admissionv1.Validation{Expression: "object.spec.replicas <= 5", Message: bigDeploymentsDenied})
	e.waitDenied("scaling the Deployment up", func(ctx context.Context) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}}
		return e.c.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":9}}`)), client.DryRunAll)
	})
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	expect(t, u, "Reconciling=True/Retrying", "Deployed=True/InstallSuccessful")

	e.helm("uninstall", "web")
	u = e.waitSoon(tu.NginxGVK, "web", "the release to be installed again", func(u *unstructured.Unstructured) bool {
		return nested(u, "status", "deployedRelease", "revision") == int64(1) &&
			tu.ConditionIs(u, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful) &&
			tu.ConditionIs(u, status.TypeReleaseFailed, metav1.ConditionFalse, "")
	})
	h := consistentHistory(t, e.ns, "web", u)
	if len(h) != 1 || h[0].Labels[rel.LabelOwnerUID] != string(u.GetUID()) {
		t.Errorf("after the reinstall Helm's history has %d revisions", len(h))
	}
	if r := e.deployment("web").Spec.Replicas; r == nil || *r != 9 {
		t.Errorf("the reinstalled Deployment has %v replicas, want the spec's 9", r)
	}
}

// A bad annotation added and then removed while the resource waits for a
// lock someone else holds: the stall clears within seconds, the lock is
// named for what it is, and once its holder finishes the resource goes on
// at once, not when the lock would be stale.
func TestBadAnnotationDuringALockWait(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	e.hookedTimeout = "10m"
	e.start(quiet)
	// Once the operator reconciles, its tenure has begun: a lock written now
	// is young, held by someone else for all the operator knows.
	e.create(gadgetGVK, "probe", map[string]any{})
	e.wait(gadgetGVK, "probe", status.TypeReady, metav1.ConditionTrue, "")
	lock := pendingRecordOf(t, "hooked", e.ns, "h", 1, helmrelease.StatusPendingInstall)
	e.writeRecord(lock)

	e.create(hookedGVK, "h", map[string]any{})
	u := e.wait(hookedGVK, "h", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonReleaseLocked)
	msg := conditionMessage(u, status.TypeIrreconcilable)
	for _, want := range []string{"locked in pending-install by an operation this operator is not running",
		`Helm's record says "Initial install underway"`, "as soon as the release's storage changes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ReleaseLocked message %q does not say %q", msg, want)
		}
	}

	e.badAnnotationAddedThenRemoved(hookedGVK, "h", func(u *unstructured.Unstructured) bool {
		return tu.ConditionIs(u, status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonReleaseLocked)
	})

	// The holder ends its install, failed: the resource installs over it.
	lock.Info.Status = helmrelease.StatusFailed
	lock.Info.Description = "Release \"h\" failed: stopped by hand"
	e.updateRecord(lock)
	u = e.waitSoon(hookedGVK, "h", "the install once the lock is gone", func(u *unstructured.Unstructured) bool {
		return tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, "")
	})
	if got := statuses(consistentHistory(t, e.ns, "h", u)); !slices.Equal(got, []helmrelease.Status{helmrelease.StatusSuperseded, helmrelease.StatusDeployed}) {
		t.Errorf("Helm's history %v, want the failed revision 1 installed over by revision 2", got)
	}
}

// A bad annotation added and then removed while the resource backs off
// after a failed upgrade: the stall clears within seconds.
func TestBadAnnotationDuringABackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.denyBigDeployments()
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)

	e.badAnnotationAddedThenRemoved(tu.NginxGVK, "web", func(u *unstructured.Unstructured) bool {
		return tu.ConditionIs(u, status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError) &&
			tu.ConditionIs(u, status.TypeReconciling, metav1.ConditionTrue, status.ReasonRetrying)
	})
}

// badAnnotationAddedThenRemoved sets upgrade-force to a value that does not
// parse, waits for the stall, removes it and waits, within seconds, for the
// stall to clear into what back says.
func (e *env) badAnnotationAddedThenRemoved(gvk schema.GroupVersionKind, name string, back func(*unstructured.Unstructured) bool) {
	e.t.Helper()
	e.annotate(gvk, name, map[string]any{rel.AnnotationUpgradeForce: "maybe"})
	e.waitSoon(gvk, name, "the stall on the bad annotation", func(u *unstructured.Unstructured) bool {
		return tu.ConditionIs(u, status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
	})
	e.annotate(gvk, name, map[string]any{rel.AnnotationUpgradeForce: nil})
	u := e.waitSoon(gvk, name, "the stall to clear once the annotation is removed", func(u *unstructured.Unstructured) bool {
		return tu.ConditionIs(u, status.TypeStalled, metav1.ConditionFalse, "") && back(u)
	})
	checkContract(e.t, u)
}

// The message of a bad annotation keeps the operator's advice whole when the
// spec holds booleans: only values are redacted, never the operator's own
// words.
func TestAnnotationAdviceIsNotRedacted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	u := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{
		"ingress": map[string]any{"enabled": false}, "serviceAccount": map[string]any{"create": true}})
	u.SetAnnotations(map[string]string{rel.AnnotationUpgradeForce: "maybe"})
	if err := e.c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidAnnotation)
	want := `The annotation helm.sdk.operatorframework.io/upgrade-force has the value "maybe", which is not a boolean: set it to "true" or "false", or remove it`
	if msg := conditionMessage(u, status.TypeStalled); msg != want {
		t.Errorf("Stalled message\n got %q\nwant %q", msg, want)
	}
	if ev := e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventReconcileFailed); ev.Message != want {
		t.Errorf("event message\n got %q\nwant %q", ev.Message, want)
	}
}

// updateRecord rewrites rel with Helm's own storage, as Helm does.
func (e *env) updateRecord(r *helmrelease.Release) {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(e.ns))).Update(r); err != nil {
		e.t.Fatalf("updating release %s revision %d: %v", r.Name, r.Version, err)
	}
}
