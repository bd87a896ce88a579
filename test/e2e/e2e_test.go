//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// Condition types and reasons of the status contract (docs/status.md), as a
// user reads them.
const (
	typeReady          = "Ready"
	typeReconciling    = "Reconciling"
	typeStalled        = "Stalled"
	typeResourcesReady = "ResourcesReady"

	reasonAllResourcesCurrent      = "AllResourcesCurrent"
	reasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

// unschedulableHints are what the scheduler says about a pod asking for more
// CPU than the node has.
var unschedulableHints = []string{"Unschedulable", "Insufficient cpu"}

const (
	patchCPU64      = `{"spec":{"resources":{"requests":{"cpu":"64"}}}}`
	patchNoRequests = `[{"op":"remove","path":"/spec/resources/requests"}]`
)

// Scenario 1: an Nginx with two replicas is installed and becomes Ready once
// its Deployment really has two available replicas.
func TestInstallBecomesReady(t *testing.T) {
	e := newEnv(t, "e2e-install", watchOptions{})
	e.applyNginx("web", "  replicaCount: 2\n  page:\n    title: "+specSecret+"\n")
	e.waitCondition("web", typeReady)

	if got := e.kubectl("get", "deployment", "web", "-o", "jsonpath={.status.availableReplicas}"); got != "2" {
		e.fatalf("deployment web has %q available replicas, want 2\n%s", got, e.describeCR("web"))
	}
	n := e.mustNginx("web")
	if rr := n.cond(typeResourcesReady); !n.is(typeResourcesReady, metav1.ConditionTrue) || rr.Reason != reasonAllResourcesCurrent {
		e.fatalf("want ResourcesReady=True %s at the current generation\n%s", reasonAllResourcesCurrent, n)
	}
	r := n.Status.Resources
	if r == nil || r.Total == 0 || r.Ready != r.Total || len(r.NotReady) != 0 {
		e.fatalf("want status.resources with total = ready > 0 and nothing not ready\n%s", n)
	}
	t.Logf("Ready: %s", n.cond(typeReady).Message)
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
}

// Scenario 2: a spec asking for more CPU than the node has turns Ready and
// ResourcesReady False, naming the Deployment and why its pod is not
// scheduled; removing the request makes the resource Ready again. The delays
// between what happened in the cluster and the status saying so are logged.
func TestUnschedulableIsNotReady(t *testing.T) {
	e := newEnv(t, "e2e-unschedulable", watchOptions{readinessTimeout: "10m"})
	e.applyNginx("web", "  replicaCount: 2\n")
	e.waitCondition("web", typeReady)
	gen := e.mustNginx("web").Metadata.Generation

	podPending := e.unschedulableFlip("web")
	notReady := e.watchNginxFlip("web", "ResourcesReady=False", func(n *nginx) bool {
		return n.Metadata.Generation > gen && n.is(typeResourcesReady, metav1.ConditionFalse)
	})
	hinted := e.watchNginxFlip("web", "ResourcesReady's message says the pod is unschedulable", func(n *nginx) bool {
		return n.Metadata.Generation > gen && n.is(typeResourcesReady, metav1.ConditionFalse) &&
			containsAny(n.cond(typeResourcesReady).Message, unschedulableHints...)
	})
	patched := time.Now()
	e.kubectl("patch", "nginx", "web", "--type=merge", "-p", patchCPU64)

	e.waitNginx("web", "ResourcesReady=False and Ready=False naming Deployment web", func(n *nginx) bool {
		return n.Metadata.Generation > gen &&
			n.is(typeResourcesReady, metav1.ConditionFalse) && n.is(typeReady, metav1.ConditionFalse) &&
			strings.Contains(n.cond(typeResourcesReady).Message, "Deployment web")
	})
	n := e.waitNginx("web", "the Unschedulable hint in ResourcesReady and Ready", func(n *nginx) bool {
		return n.Metadata.Generation > gen &&
			n.is(typeResourcesReady, metav1.ConditionFalse) && n.is(typeReady, metav1.ConditionFalse) &&
			containsAny(n.cond(typeResourcesReady).Message, unschedulableHints...) &&
			containsAny(n.cond(typeReady).Message, unschedulableHints...)
	})
	for _, typ := range []string{typeResourcesReady, typeReady} {
		if msg := n.cond(typ).Message; !strings.Contains(msg, "Deployment web") {
			e.fatalf("%s's message does not name Deployment web: %s\n%s", typ, msg, n)
		}
	}
	if !listsNotReady(n, "Deployment", "web") {
		e.fatalf("status.resources.notReady does not list Deployment web\n%s", n)
	}
	t.Logf("ResourcesReady: %s", n.cond(typeResourcesReady).Message)
	e.logDelay("unschedulable-to-status delay", podPending, hinted, "web")
	t.Logf("patch-to-ResourcesReady=False delay: %.2fs (the upgrade's own readiness check)", e.when(notReady, "web").Sub(patched).Seconds())

	// Restore: no request; the rollout completes and Ready returns.
	gen = n.Metadata.Generation
	rolled := e.deploymentFlip("web", "Deployment web rolled out without the CPU request", func(d *appsv1.Deployment, deleted bool) bool {
		if deleted || len(d.Spec.Template.Spec.Containers) == 0 {
			return false
		}
		_, cpu := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		return !cpu && rolledOut(d)
	})
	ready := e.watchNginxFlip("web", "ResourcesReady=True", func(n *nginx) bool {
		return n.Metadata.Generation > gen && n.is(typeResourcesReady, metav1.ConditionTrue)
	})
	e.kubectl("patch", "nginx", "web", "--type=json", "-p", patchNoRequests)
	e.waitCondition("web", typeReady)
	e.logDelay("readiness-to-status delay", rolled, ready, "web")

	n = e.mustNginx("web")
	if rr := n.cond(typeResourcesReady); !n.is(typeResourcesReady, metav1.ConditionTrue) || rr.Reason != reasonAllResourcesCurrent {
		e.fatalf("after the restore, want ResourcesReady=True %s\n%s", reasonAllResourcesCurrent, n)
	}
	if r := n.Status.Resources; r == nil || r.Total == 0 || r.Ready != r.Total {
		e.fatalf("after the restore, want status.resources total = ready > 0\n%s", n)
	}
}

// Scenario 3: a Deployment of the release deleted by hand is recreated by
// the operator and the resource is Ready again. It is deleted twice: as
// `kubectl delete` does by default (background: the Deployment is gone at
// once), then with --cascade=foreground (it stays, terminating, until its
// pods are gone). The delays are logged, not asserted; whether the status
// shows the Deployment not ready at all depends on whether the recreated one
// is already Current when the operator judges it.
func TestDeletedObjectIsRecreated(t *testing.T) {
	e := newEnv(t, "e2e-recreate", watchOptions{readinessTimeout: "10m"})
	e.applyNginx("web", "  replicaCount: 2\n")
	e.waitCondition("web", typeReady)

	for _, cascade := range []string{"", "--cascade=foreground"} {
		cmd := strings.TrimSpace("kubectl delete deployment web " + cascade)
		old, err := e.deployment(context.Background(), "web")
		if err != nil {
			e.fatalf("reading deployment web: %v", err)
		}
		// Deleted: gone, or (foreground) marked for deletion.
		gone := e.deploymentFlip("web", "Deployment web deleted", func(d *appsv1.Deployment, deleted bool) bool {
			return deleted || d.UID != old.UID || d.DeletionTimestamp != nil
		})
		back := e.deploymentFlip("web", "Deployment web recreated", func(d *appsv1.Deployment, deleted bool) bool {
			return !deleted && d.UID != old.UID
		})
		rolled := e.deploymentFlip("web", "the recreated Deployment web rolled out", func(d *appsv1.Deployment, deleted bool) bool {
			return !deleted && d.UID != old.UID && rolledOut(d)
		})
		rec := e.recordCondition("web", typeResourcesReady)
		args := []string{"delete", "deployment", "web"}
		if cascade != "" {
			args = append(args, cascade)
		}
		e.kubectl(args...)

		e.when(back, "web")
		e.when(rolled, "web")
		n := e.waitNginx("web", "Ready=True and ResourcesReady=True with the recreated Deployment", func(n *nginx) bool {
			r := n.Status.Resources
			return n.is(typeReady, metav1.ConditionTrue) && n.is(typeResourcesReady, metav1.ConditionTrue) &&
				r != nil && r.Total > 0 && r.Ready == r.Total
		})
		// The watch is at most milliseconds behind the read above.
		time.Sleep(time.Second)
		changes := rec.finish()
		e.waitCondition("web", typeReady)

		d, err := e.deployment(context.Background(), "web")
		if err != nil {
			e.fatalf("reading the recreated deployment web: %v", err)
		}
		if d.UID == old.UID || d.Labels["app.kubernetes.io/managed-by"] != "Helm" || d.Status.AvailableReplicas != 2 {
			e.fatalf("after %s, want a new Deployment web of the release with 2 available replicas; got uid %s (old %s), labels %v, %d available\n%s",
				cmd, d.UID, old.UID, d.Labels, d.Status.AvailableReplicas, n)
		}

		t.Logf("%s:", cmd)
		deleted := e.when(gone, "web")
		t.Logf("  deletion-to-recreation delay: %.2fs", e.when(back, "web").Sub(deleted).Seconds())
		t.Logf("  deletion-to-rolled-out delay: %.2fs", e.when(rolled, "web").Sub(deleted).Seconds())
		var wentFalse, wentTrue *transition
		for i := range changes {
			switch c := &changes[i]; {
			case i == 0:
			case c.status != metav1.ConditionTrue && wentFalse == nil:
				wentFalse = c
			case c.status == metav1.ConditionTrue && wentFalse != nil && wentTrue == nil:
				wentTrue = c
			}
		}
		if wentFalse == nil {
			t.Logf("  the status never showed the Deployment not ready: ResourcesReady stayed True " +
				"(the recreated Deployment was Current by the time the operator judged it)")
			continue
		}
		t.Logf("  deletion-to-status delay: %.2fs (ResourcesReady=%s %s: %s)",
			wentFalse.at.Sub(deleted).Seconds(), wentFalse.status, wentFalse.reason, wentFalse.message)
		if wentTrue != nil {
			t.Logf("  deletion-to-Ready delay: %.2fs (ResourcesReady=True again)", wentTrue.at.Sub(deleted).Seconds())
		}
	}
}

// Scenario 4: with a watch's readinessTimeout of 10s, a resource whose pods
// can never be scheduled becomes Stalled (ProgressDeadlineExceeded) and not
// Ready, naming the Deployment.
func TestReadinessTimeoutStalls(t *testing.T) {
	e := newEnv(t, "e2e-stalled", watchOptions{readinessTimeout: "10s"})
	start := time.Now()
	e.applyNginx("web", "  resources:\n    requests:\n      cpu: \"64\"\n")

	n := e.waitNginx("web", "Stalled=True "+reasonProgressDeadlineExceeded, func(n *nginx) bool {
		return n.is(typeStalled, metav1.ConditionTrue) && n.cond(typeStalled).Reason == reasonProgressDeadlineExceeded
	})
	t.Logf("Stalled %s %.2fs after the apply (readinessTimeout 10s): %s",
		reasonProgressDeadlineExceeded, time.Since(start).Seconds(), n.cond(typeStalled).Message)
	if !n.is(typeReady, metav1.ConditionFalse) {
		e.fatalf("a stalled resource must not be Ready\n%s", n)
	}
	if !n.is(typeResourcesReady, metav1.ConditionFalse) {
		e.fatalf("want ResourcesReady=False\n%s", n)
	}
	if !n.is(typeReconciling, metav1.ConditionFalse) {
		e.fatalf("want Reconciling=False while Stalled (kstatus: not both)\n%s", n)
	}
	for _, typ := range []string{typeStalled, typeReady} {
		if msg := n.cond(typ).Message; !strings.Contains(msg, "Deployment web") {
			e.fatalf("%s's message does not name the not-ready Deployment web: %s\n%s", typ, msg, n)
		}
	}
	if !listsNotReady(n, "Deployment", "web") {
		e.fatalf("status.resources.notReady does not list Deployment web\n%s", n)
	}
	if !containsAny(n.cond(typeStalled).Message, unschedulableHints...) {
		t.Logf("note: Stalled's message does not say why the pod is pending")
	}
	e.checkOracle(oracleOptions{stalled: []string{"Nginx/web"}})
}

// Scenario 5: a readiness change that no Helm action causes. A NoExecute
// taint on the cluster's one node evicts the pod and keeps its replacement
// unscheduled (Deployment Available=False); removing the taint lets it run
// again. The delays between the Deployment's Available condition flipping
// and ResourcesReady following, both seen through watches, are logged.
func TestReadinessToStatusDelay(t *testing.T) {
	e := newEnv(t, "e2e-delay", watchOptions{readinessTimeout: "10m"})
	e.applyNginx("web", "  replicaCount: 1\n")
	e.waitCondition("web", typeReady)

	const taint = "e2e.helmapp.io/evict=true:NoExecute"
	available := func(want bool) func(d *appsv1.Deployment, deleted bool) bool {
		return func(d *appsv1.Deployment, deleted bool) bool {
			return !deleted && deploymentAvailable(d) == want && (!want || rolledOut(d))
		}
	}
	resourcesReady := func(want metav1.ConditionStatus) func(n *nginx) bool {
		return func(n *nginx) bool { return n.is(typeResourcesReady, want) }
	}

	down := e.deploymentFlip("web", "Deployment web Available=False", available(false))
	notReady := e.watchNginxFlip("web", "ResourcesReady=False", resourcesReady(metav1.ConditionFalse))
	e.kubectl("taint", "node", controlplane.FakeNodeName, taint)
	t.Cleanup(func() { _, _ = e.tryKubectl("taint", "node", controlplane.FakeNodeName, taint+"-") })
	e.logDelay("readiness-to-status delay", down, notReady, "web")
	n := e.waitNginx("web", "Ready=False naming Deployment web", func(n *nginx) bool {
		return n.is(typeReady, metav1.ConditionFalse) && strings.Contains(n.cond(typeResourcesReady).Message, "Deployment web")
	})
	t.Logf("ResourcesReady with the node tainted: %s", n.cond(typeResourcesReady).Message)

	up := e.deploymentFlip("web", "Deployment web Available=True and rolled out", available(true))
	ready := e.watchNginxFlip("web", "ResourcesReady=True", resourcesReady(metav1.ConditionTrue))
	e.kubectl("taint", "node", controlplane.FakeNodeName, taint+"-")
	e.logDelay("readiness-to-status delay", up, ready, "web")
	e.waitCondition("web", typeReady)
}

// listsNotReady reports whether status.resources.notReady lists kind/name.
func listsNotReady(n *nginx, kind, name string) bool {
	if n.Status.Resources == nil {
		return false
	}
	for _, o := range n.Status.Resources.NotReady {
		if o.Kind == kind && o.Name == name {
			return true
		}
	}
	return false
}
