package reconciler_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// laggingRecords is the cache of Helm's release records as a view that lags
// behind the API server, as it does after a watch broke (an API server
// restart) or while an event is on its way: while lag is set, it does not
// show the records of revisions newer than 1.
type laggingRecords struct {
	client.Reader
	lag *atomic.Bool
}

func (l laggingRecords) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	recs, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok || !l.lag.Load() {
		return nil
	}
	kept := recs.Items[:0]
	for _, it := range recs.Items {
		if v := it.Labels["version"]; v == "" || v == "1" {
			kept = append(kept, it)
		}
	}
	recs.Items = kept
	return nil
}

// Found by the seeded random histories (issue 28: seed 317190492, an API
// server restart then `helm upgrade` by hand): the operator re-applied the
// deployed revision's objects over the upgrade the helm CLI was running,
// because its cache of Helm's records did not show the CLI's pending
// revision yet, and reported revision 1 while Helm had deployed 2. A
// re-apply now confirms from Helm's storage that the revision it restores
// is still the latest before it writes, and the pass starts over from
// Helm's storage when it is not: the CLI's pending revision is seen and
// waited for, and nothing of it is overwritten.
func TestDriftOverALaggingViewOfHelmsStorageIsNotRestored(t *testing.T) {
	t.Parallel()
	var lag atomic.Bool
	e, log := newSettledEnv(t, testWatches(t), func(c *operator.Config) {
		c.WrapRecords = func(r client.Reader) client.Reader { return laggingRecords{Reader: r, lag: &lag} }
	})
	ctx := context.Background()
	cr := e.create(gadgetGVK, "g", map[string]any{"count": int64(3)})
	e.wait(gadgetGVK, "g", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	log.quiet(t)

	// The helm CLI begins an upgrade: its pending revision 2 is stored; the
	// operator's view of Helm's storage does not show it yet.
	lag.Store(true)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(e.ns)))
	h := history(t, e.ns, "g")
	if len(h) != 1 {
		t.Fatalf("%d revisions after the install, want 1", len(h))
	}
	pending := *h[0]
	info := *h[0].Info
	info.Status, info.Description = release.StatusPendingUpgrade, "Preparing upgrade"
	info.LastDeployed = info.LastDeployed.Add(time.Second)
	pending.Info, pending.Version = &info, 2
	if err := store.Create(&pending); err != nil {
		t.Fatal(err)
	}
	// Its first write changes the ConfigMap: drift, as the operator sees it.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: e.ns}}
	if err := e.c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"count":"7"}}`))); err != nil {
		t.Fatal(err)
	}

	u := e.wait(gadgetGVK, "g", status.TypeIrreconcilable, metav1.ConditionTrue, status.ReasonReleaseLocked)
	if msg := conditionMessage(u, status.TypeIrreconcilable); !strings.Contains(msg, "revision 2 is locked in pending-upgrade") {
		t.Errorf("Irreconcilable says %q, want the CLI's pending revision 2", msg)
	}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["count"] != "7" {
		t.Errorf("the ConfigMap the helm CLI is upgrading was overwritten: %v %v", cm.Data, err)
	}
	for _, ev := range e.events(cr) {
		if ev.Reason == reconciler.EventDriftCorrected {
			t.Errorf("drift was corrected over the CLI's pending revision: %s", ev.Message)
		}
	}

	// The CLI's upgrade never finishes and its record is removed (helm
	// rollback's cleanup, by hand); the view catches up: revision 1 is the
	// latest again and its drift is corrected.
	if _, err := store.Delete("g", 2); err != nil {
		t.Fatal(err)
	}
	lag.Store(false)
	e.poke(gadgetGVK, "g")
	e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	e.waitSoon(gadgetGVK, "g", "revision 1 reconciled again", func(u *unstructured.Unstructured) bool {
		return nested(u, "status", "deployedRelease", "revision") == int64(1) &&
			tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful) &&
			tu.ConditionIs(u, status.TypeIrreconcilable, metav1.ConditionFalse, status.ReasonReconcileSuccessful)
	})
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["count"] != "3" {
		t.Errorf("the ConfigMap was not restored once the view caught up: %v %v", cm.Data, err)
	}
	if h := history(t, e.ns, "g"); len(h) != 1 || h[0].Info.Status != release.StatusDeployed {
		t.Errorf("history after the catch-up: %d revisions, want revision 1 deployed", len(h))
	}
}
