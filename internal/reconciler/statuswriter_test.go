package reconciler_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A status computed from a resource as a lagging cache showed it is never
// written on another resource of the same name: the resource was deleted
// and created again (another uid) since. The write conflicts, the writer
// reads the name again, finds another resource, and writes nothing
// (NotFound: the resource the status describes is gone). Issue 28's missed
// views: the stale resource's status used to land on its successor.
func TestStatusIsNotWrittenOnAResourceCreatedAgain(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	ctx := context.Background()
	old := e.create(gadgetGVK, "g", map[string]any{"count": int64(1)})
	stale := old.DeepCopy()
	if err := e.c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "gadget g gone", func() (bool, string) {
		_, err := tu.Get(t, e.c, gadgetGVK, e.ns, "g")
		return apierrors.IsNotFound(err), "still there"
	})
	fresh := e.create(gadgetGVK, "g", map[string]any{"count": int64(2)})
	if fresh.GetUID() == stale.GetUID() {
		t.Fatal("the gadget created again has the old uid")
	}

	err := status.Writer{Client: e.c}.Write(ctx, stale, status.Status{ObservedGeneration: 1, Phase: "Deployed"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("writing the old gadget's status: %v, want NotFound", err)
	}
	got, err := tu.Get(t, e.c, gadgetGVK, e.ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	if st, ok, _ := unstructured.NestedMap(got.Object, "status"); ok && len(st) > 0 {
		t.Errorf("the gadget created again (uid %s) got the old one's status: %v", got.GetUID(), st)
	}
}
