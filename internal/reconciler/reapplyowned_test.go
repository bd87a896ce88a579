package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Issue 38: a re-apply restores only the release's own objects. An object
// the deployed record lists that exists without the release's Helm
// ownership annotations is someone else's: it is neither patched nor
// taken over, and a ReapplySkipped event names it, while the release's own
// objects are still restored. A missing object is re-created only from a
// record the operator vouches for: after a restart with a status that
// records no manifest digest, the first re-apply leaves it missing and
// says so.
func TestReapplyRestoresOnlyTheReleasesOwnObjects(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "watchDependentResources: false"))
	ctx := context.Background()
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	key := client.ObjectKey{Namespace: e.ns, Name: "web"}

	// The release's ConfigMap replaced by someone else's of the same name.
	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}, Data: map[string]string{"owner": "someone else"}}
	if err := e.c.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`))); err != nil {
		t.Fatal(err)
	}
	e.poke(tu.NginxGVK, "web")
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	if !strings.Contains(ev.Message, "Restored 1 objects") || !strings.Contains(ev.Message, "Deployment web (changed)") {
		t.Errorf("DriftCorrected event %q, want only the Deployment restored", ev.Message)
	}
	skipped := e.waitEventSaying(cr, reconciler.EventReapplySkipped, fmt.Sprintf("ConfigMap %s/web (not the release's", e.ns))
	if skipped.Type != corev1.EventTypeWarning {
		t.Errorf("ReapplySkipped is a %s event, want Warning", skipped.Type)
	}
	got := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != theirs.ResourceVersion || got.Data["owner"] != "someone else" || got.Annotations["meta.helm.sh/release-name"] != "" {
		t.Errorf("someone else's ConfigMap was written by the re-apply: %v %v", got.Data, got.Annotations)
	}

	// A record the operator does not vouch for: the operator stopped, the
	// status' manifest digest removed (as an older operator wrote it), the
	// ConfigMap gone.
	e.stopOp()
	u := e.get(tu.NginxGVK, "web")
	unstructured.RemoveNestedField(u.Object, "status", "deployedRelease", "manifestDigest")
	if err := e.c.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	e.stopOp = e.startOp()
	e.poke(tu.NginxGVK, "web")
	e.waitEventSaying(cr, reconciler.EventReapplySkipped, "ConfigMap "+e.ns+"/web (missing; not re-created")
	if err := e.c.Get(ctx, key, &corev1.ConfigMap{}); err == nil {
		// A later pass, once the status records the digest again, may
		// re-create it: only the first is judged here, by its event.
		t.Log("the ConfigMap was re-created by a later re-apply")
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// waitEventSaying waits for an event of reason about u whose message holds
// want, and returns it.
func (e *env) waitEventSaying(u *unstructured.Unstructured, reason, want string) corev1.Event {
	e.t.Helper()
	var found corev1.Event
	tu.Eventually(e.t, time.Minute, fmt.Sprintf("a %s event saying %q", reason, want), func() (bool, string) {
		var seen []string
		for _, ev := range e.events(u) {
			if ev.Reason == reason && strings.Contains(ev.Message, want) {
				found = ev
				return true, ""
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, strings.Join(seen, " | ")
	})
	return found
}
