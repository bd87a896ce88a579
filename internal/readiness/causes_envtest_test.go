package readiness_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// countingReader is the real client, counting its lists.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	lists []string
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	r.mu.Lock()
	what := "pods"
	if _, ok := list.(*corev1.EventList); ok {
		what = "events " + o.FieldSelector.String()
	}
	r.lists = append(r.lists, what)
	r.mu.Unlock()
	return r.Reader.List(ctx, list, opts...)
}

func (r *countingReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lists)
}

// A cause is looked up once per version of the object: a second Check of the
// same Deployment asks nothing until its recheck is due, or until it changes;
// a Deployment that becomes Current is never asked about.
func TestCausesAreLookedUpOncePerVersion(t *testing.T) {
	ctx := context.Background()
	c, ns := pendingPodOfDeployment(t, "causes-memo")

	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	r := &countingReader{Reader: c}
	checker := readiness.Checker{Reader: r, Causes: readiness.NewCauses(), Now: func() time.Time { return now }}
	refs := []readiness.ObjectRef{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}}

	res := checker.Check(ctx, refs)
	want := "1/3 replicas available; pod web-pending: Unschedulable: " + insufficientCPU
	if res[0].Message != want || res[0].Reason != status.ReasonUnschedulable || !res[0].RecheckAt.Equal(now.Add(readiness.FirstRecheck)) {
		t.Fatalf("Check() = %+v; want %q, reason Unschedulable, recheck in %s", res[0], want, readiness.FirstRecheck)
	}
	if n := r.count(); n != 1 {
		t.Fatalf("the first Check listed %d times (%v), want once (the pods)", n, r.lists)
	}
	if again := checker.Check(ctx, refs); again[0] != res[0] || r.count() != 1 {
		t.Errorf("the same version checked again: %+v after %d lists; want the same result and no list", again[0], r.count())
	}

	// Due again: looked up, the same cause, so the next wait doubles.
	now = now.Add(readiness.FirstRecheck)
	res = checker.Check(ctx, refs)
	if r.count() != 2 || !res[0].RecheckAt.Equal(now.Add(2*readiness.FirstRecheck)) {
		t.Errorf("after the recheck delay: %d lists, recheck at %s; want 2 lists, recheck in %s", r.count(), res[0].RecheckAt, 2*readiness.FirstRecheck)
	}

	// A new version of the Deployment: looked up at once.
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	d.Status.ReadyReplicas = 2
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	checker.Check(ctx, refs)
	if r.count() != 3 {
		t.Errorf("a new version of the Deployment: %d lists, want 3", r.count())
	}

	// Current: no lookup, and nothing remembered.
	rolledOut(t, c, d)
	now = now.Add(time.Hour)
	res = checker.Check(ctx, refs)
	if res[0].Status != kstatus.CurrentStatus || res[0].Reason != "" || !res[0].RecheckAt.IsZero() || r.count() != 3 || checker.Causes.Len() != 0 {
		t.Errorf("a Current Deployment: %+v after %d lists, %d remembered; want no cause, no list, nothing remembered", res[0], r.count(), checker.Causes.Len())
	}
}

// A claim's events are read by a field selector on its UID: the latest
// Warning of this claim is quoted, not another claim's, and the values of the
// resource's spec in it are redacted.
func TestClaimCauseFromItsEvents(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "causes-claim")
	claim := func(name string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr.To("secret-class-name"),
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := c.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		pvc.Status.Phase = corev1.ClaimPending
		if err := c.Status().Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	data, other := claim("data"), claim("other")
	at := time.Now().Truncate(time.Second)
	event := func(name string, pvc *corev1.PersistentVolumeClaim, typ, reason, msg string, when time.Time) {
		e := &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns,
				Name: pvc.Name, UID: pvc.UID},
			Type: typ, Reason: reason, Message: msg, Source: corev1.EventSource{Component: "persistentvolume-controller"},
			FirstTimestamp: metav1.NewTime(when), LastTimestamp: metav1.NewTime(when), Count: 1,
		}
		if err := c.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	notFound := `storageclass.storage.k8s.io "secret-class-name" not found`
	event("data.1", data, corev1.EventTypeWarning, "ProvisioningFailed", "an older failure", at.Add(-time.Minute))
	event("data.2", data, corev1.EventTypeWarning, "ProvisioningFailed", notFound, at)
	event("data.3", data, corev1.EventTypeNormal, "ExternalProvisioning", "waiting", at.Add(time.Second))
	event("other.1", other, corev1.EventTypeWarning, "FailedBinding", "no persistent volumes available", at.Add(time.Minute))

	redactor := status.NewRedactor(map[string]any{"storageClass": "secret-class-name"})
	r := &countingReader{Reader: c}
	checker := readiness.Checker{Reader: r, Redactor: redactor}
	res := checker.Check(ctx, []readiness.ObjectRef{{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: ns, Name: "data"}})
	want := `PVC is not Bound. phase: Pending; ProvisioningFailed: storageclass.storage.k8s.io "[redacted]" not found`
	if res[0].Status != kstatus.InProgressStatus || res[0].Reason != status.ReasonClaimPending || res[0].Message != want {
		t.Errorf("Check() = %+v\nwant InProgress ClaimPending %q", res[0], want)
	}
	if len(r.lists) != 1 || !strings.Contains(r.lists[0], "involvedObject.uid="+string(data.UID)) {
		t.Errorf("lists %v; want one list of events by the claim's UID", r.lists)
	}
}
