package reconciler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Two resources of different kinds with the same name in one namespace
// would share a release name. The second is refused, never acts on the
// first's release, and deleting it uninstalls nothing; once the first is
// gone, the second installs. Gadget has its own chart (like Echo beside
// Nginx); Widget has nginx's own chart, so only the owner labels tell the
// releases apart.
func TestReleaseNameConflict(t *testing.T) {
	for _, intruder := range []schema.GroupVersionKind{gadgetGVK, widgetGVK} {
		t.Run(intruder.Kind, func(t *testing.T) {
			t.Parallel()
			// The deletions below take the uninstall path (UninstallSkipped,
			// the owner's uninstall freeing the name), which the nginx and
			// gadget charts' releases need no finalizer for: envtest has no
			// garbage collector.
			e := newEnvWatching(t, testWatches(t, finalizerAlways))
			owner := e.create(tu.NginxGVK, "web", map[string]any{})
			e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
			before := history(t, e.ns, "web")
			if len(before) != 1 || before[0].Labels[release.LabelOwnerUID] != string(owner.GetUID()) {
				t.Fatalf("the owner's release does not carry its identity: %d revisions, labels %v", len(before), before[0].Labels)
			}
			dep := e.deployment("web")

			cr := e.create(intruder, "web", map[string]any{})
			u := e.wait(intruder, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseNameConflict)
			expect(t, u, "Ready=False/ReleaseNameConflict", "Reconciling=False/Stalled", "Deployed=False/NotDeployed")
			want := "Release web belongs to Nginx " + e.ns + "/web"
			if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want) {
				t.Errorf("Ready message %q does not start with %q", msg, want)
			}
			if d := nested(u, "status", "deployedRelease"); d != nil {
				t.Errorf("the intruder claims a deployed release: %v", d)
			}
			e.waitEvent(cr, corev1.EventTypeWarning, status.ReasonReleaseNameConflict)

			// Reconciled again and again, it stays quiet: one event, one count.
			gets := e.gets.Load()
			for i := 0; i < 3; i++ {
				e.poke(intruder, "web")
				want := gets + int64(i+1)
				tu.Eventually(t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
					return e.gets.Load() >= want, "no reconcile yet"
				})
			}
			time.Sleep(time.Second) // events are sent asynchronously
			if n := e.countEvents(cr, status.ReasonReleaseNameConflict); n != 1 {
				t.Errorf("%d ReleaseNameConflict events, want 1", n)
			}
			if f := nested(e.get(intruder, "web"), "status", "failures"); f != int64(1) {
				t.Errorf("status.failures = %v after repeated reconciles of one conflict, want 1", f)
			}

			// The owner is untouched: Ready at its revision, no foreign revision.
			o := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
			if rev := nested(o, "status", "deployedRelease", "revision"); rev != int64(1) {
				t.Errorf("owner's deployedRelease.revision = %v, want 1", rev)
			}
			e.sameHistory("web", before)
			if after := e.deployment("web"); after.ResourceVersion != dep.ResourceVersion {
				t.Errorf("the owner's Deployment was changed by the intruder")
			}

			// Deleting the intruder uninstalls nothing.
			if err := e.c.Delete(context.Background(), cr); err != nil {
				t.Fatal(err)
			}
			e.waitGone(intruder, "web")
			if ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventUninstallSkipped); !strings.Contains(ev.Message, "belongs to Nginx") {
				t.Errorf("UninstallSkipped event says %q", ev.Message)
			}
			e.sameHistory("web", before)
			for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}} {
				if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, obj); err != nil {
					t.Errorf("the owner's %T is gone after the intruder was deleted: %v", obj, err)
				}
			}
			e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

			// Once the owner is gone, the name is free and a waiting resource installs.
			waiting := e.create(intruder, "web", map[string]any{})
			e.wait(intruder, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseNameConflict)
			if err := e.c.Delete(context.Background(), owner); err != nil {
				t.Fatal(err)
			}
			e.waitGone(tu.NginxGVK, "web")
			u = e.wait(intruder, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
			expect(t, u, "Stalled=False/NotStalled")
			h := history(t, e.ns, "web")
			if len(h) != 1 || h[0].Labels[release.LabelOwnerUID] != string(waiting.GetUID()) || h[0].Labels[release.LabelOwnerKind] != intruder.Kind {
				t.Errorf("after the owner left, history has %d revisions, latest labels %v", len(h), h[len(h)-1].Labels)
			}
		})
	}
}

// A release made with the helm CLI of the watch's chart is adopted: the
// resource records its identity on it, upgrades it, and uninstalls it when
// deleted. One of another chart is refused.
func TestReleaseMadeWithTheHelmCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	charts := filepath.Join(tu.RepoRoot(), "helm-charts")
	e.helm("install", "cli", filepath.Join(charts, "nginx"), "--set", "replicaCount=1")
	e.helm("install", "other", filepath.Join("testdata", "charts", "gadget"))

	cr := e.create(tu.NginxGVK, "cli", map[string]any{"replicaCount": int64(2)})
	u := e.wait(tu.NginxGVK, "cli", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
		t.Errorf("deployedRelease.revision = %v, want 2: the adopted release is upgraded to the resource's values", rev)
	}
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventReleaseAdopted)
	e.wantRevisionCauses(u, 2, status.ActionUpgrade, "deployed", false, "Adopted: the release had no owner", "SpecChanged: generation 1, values keys ")
	h := history(t, e.ns, "cli")
	if len(h) != 2 || h[1].Labels[release.LabelOwnerUID] != string(cr.GetUID()) {
		t.Errorf("history after adoption: %d revisions, latest labels %v", len(h), h[len(h)-1].Labels)
	}
	if r := e.deployment("cli").Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("the adopted release's Deployment has %v replicas, want 2", r)
	}

	other := e.create(tu.NginxGVK, "other", map[string]any{})
	u = e.wait(tu.NginxGVK, "other", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseNameConflict)
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, "not made by this operator and is of chart gadget, not nginx") {
		t.Errorf("Stalled message %q does not name the charts", msg)
	}
	if h := history(t, e.ns, "other"); len(h) != 1 || h[0].Labels[release.LabelOwnerUID] != "" {
		t.Errorf("the refused release changed: %d revisions, labels %v", len(h), h[0].Labels)
	}

	// The adopted release is the resource's own: deleting it uninstalls.
	// The refused one is not: deleting that resource leaves it.
	for _, obj := range []*unstructured.Unstructured{cr, other} {
		if err := e.c.Delete(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		e.waitGone(tu.NginxGVK, obj.GetName())
	}
	if out, err := cp.Helm(context.Background(), "status", "cli", "-n", e.ns); err == nil {
		t.Errorf("helm status cli after the resource was deleted: %s", out)
	}
	if out := e.helm("status", "other"); !strings.Contains(out, "STATUS: deployed") {
		t.Errorf("helm status other after the refused resource was deleted:\n%s", out)
	}
}

// A name longer than a release name is refused at admission by the CRD's
// rule; a resource of a kind whose CRD lacks the rule is stalled, not
// blamed on Helm's storage, and can be deleted.
func TestNameTooLongForARelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	long := strings.Repeat("n", 54)
	err := e.c.Create(context.Background(), tu.NewCR(tu.NginxGVK, e.ns, long, map[string]any{}))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name must be at most 53 characters: it is the name of the resource's Helm release") {
		t.Fatalf("creating an Nginx with a 54-character name: %v", err)
	}
	if err := e.c.Create(context.Background(), tu.NewCR(tu.NginxGVK, e.ns, long[:53], map[string]any{})); err != nil {
		t.Errorf("a 53-character name is refused: %v", err)
	}

	cr := e.create(widgetGVK, long, map[string]any{})
	u := e.wait(widgetGVK, long, status.TypeStalled, metav1.ConditionTrue, status.ReasonInvalidReleaseName)
	expect(t, u, "Ready=False/InvalidReleaseName", "Irreconcilable=True/InvalidReleaseName")
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, "Helm limits release names to 53 characters and this one has 54") {
		t.Errorf("Stalled message %q", msg)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, status.ReasonInvalidReleaseName)
	if err := e.c.Delete(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	e.waitGone(widgetGVK, long)
}

func (e *env) deployment(name string) *appsv1.Deployment {
	e.t.Helper()
	d := &appsv1.Deployment{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// sameHistory checks that the release's history is still want: the same
// revisions, statuses and owners.
func (e *env) sameHistory(name string, want []*helmrelease.Release) {
	e.t.Helper()
	got := history(e.t, e.ns, name)
	if len(got) != len(want) {
		e.t.Errorf("release %s has %d revisions, want %d", name, len(got), len(want))
		return
	}
	for i := range got {
		if got[i].Version != want[i].Version || got[i].Info.Status != want[i].Info.Status ||
			got[i].Labels[release.LabelOwnerUID] != want[i].Labels[release.LabelOwnerUID] {
			e.t.Errorf("release %s revision %d changed: %s owned by %s, was %s owned by %s", name, got[i].Version,
				got[i].Info.Status, got[i].Labels[release.LabelOwnerUID], want[i].Info.Status, want[i].Labels[release.LabelOwnerUID])
		}
	}
}

func (e *env) countEvents(u *unstructured.Unstructured, reason string) int {
	n := 0
	for _, ev := range e.events(u) {
		if ev.Reason == reason {
			n++
			if ev.Series != nil {
				n += int(ev.Series.Count) - 1
			}
		}
	}
	return n
}

// helm runs the helm CLI in the test's namespace, as a user would.
func (e *env) helm(args ...string) string {
	e.t.Helper()
	out, err := cp.Helm(context.Background(), append(args, "-n", e.ns)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// Helm's storage changed behind the operator's back (someone deleted the
// release's Secrets) is noticed at once, not at the next reconcile period:
// the resource installs its release again, adopting the objects still in
// the cluster, including one the operator re-created after it was deleted.
func TestLostReleaseStorageIsNoticed(t *testing.T) {
	t.Parallel()
	// A reconcile period longer than the test: only the storage watch can notice.
	e := newEnv(t, func(c *operator.Config) { c.ReconcilePeriod = time.Hour })
	ctx := context.Background()
	e.create(tu.NginxGVK, "web", map[string]any{})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
		t.Fatalf("deployedRelease.revision = %v after the upgrade", rev)
	}

	// The Deployment is deleted and re-created by the operator, with Helm's
	// ownership metadata.
	old := e.deployment("web")
	if err := e.c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	var recreated *appsv1.Deployment
	tu.Eventually(t, time.Minute, "the Deployment to be re-created", func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "web"}, d); err != nil || d.UID == old.UID {
			return false, fmt.Sprint(err)
		}
		recreated = d
		return true, ""
	})
	if a := recreated.Annotations; a["meta.helm.sh/release-name"] != "web" || a["meta.helm.sh/release-namespace"] != e.ns ||
		recreated.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("the re-created Deployment lacks Helm's ownership metadata: labels %v, annotations %v", recreated.Labels, a)
	}

	// The release's Secrets are deleted, as `kubectl delete secret -l owner=helm,name=web` does.
	if err := e.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(e.ns), client.MatchingLabels{"owner": "helm", "name": "web"}); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("deployedRelease.revision = %v after the release's storage was lost; want 1, installed again", rev)
	}
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	h := history(t, e.ns, "web")
	if len(h) != 1 || h[0].Info.Status != helmrelease.StatusDeployed || h[0].Labels[release.LabelOwnerUID] != string(u.GetUID()) {
		t.Errorf("history after the reinstall: %d revisions", len(h))
	}
	if d := e.deployment("web"); d.UID != recreated.UID {
		t.Errorf("the reinstall replaced the Deployment instead of adopting it")
	}
}
