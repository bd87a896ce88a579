package reconciler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A re-apply restores what was changed or deleted by hand and names it in a
// DriftCorrected event; a re-apply with no drift writes no object and emits
// nothing. Dependent watches are off, so that only the test's poke runs the
// re-apply, after both changes.
func TestDriftIsCorrectedAndNamed(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "watchDependentResources: false"))
	ctx := context.Background()
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	// Without dependent watches readiness is judged again only every
	// reconcilePeriod: being deployed is enough here.
	e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	key := client.ObjectKey{Namespace: e.ns, Name: "web"}

	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`))); err != nil {
		t.Fatal(err)
	}
	e.poke(tu.NginxGVK, "web")
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	for _, want := range []string{"Restored 2 objects of release web", "ConfigMap web (deleted)", "Deployment web (changed)"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("DriftCorrected event %q does not say %q", ev.Message, want)
		}
	}
	if err := e.c.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the deleted ConfigMap was not re-created: %v", err)
	}
	dep := &appsv1.Deployment{}
	if err := e.c.Get(ctx, key, dep); err != nil || *dep.Spec.Replicas != 2 {
		t.Errorf("the Deployment's replicas were not restored: %v %v", dep.Spec.Replicas, err)
	}
	if e.objectWrites.Load() < 2 {
		t.Fatalf("%d object writes counted for two corrections: the count proves nothing", e.objectWrites.Load())
	}

	// No drift: nothing written, nothing said.
	time.Sleep(time.Second)
	rvs := map[string]string{}
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := e.c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		rvs[typeName(o)] = o.GetResourceVersion()
	}
	writes, gets := e.objectWrites.Load(), e.gets.Load()
	for i := 0; i < 2; i++ {
		e.poke(tu.NginxGVK, "web")
		want := gets + int64(i+1)
		tu.Eventually(t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
			return e.gets.Load() >= want, "no reconcile yet"
		})
	}
	time.Sleep(time.Second)
	if n := e.objectWrites.Load() - writes; n != 0 {
		t.Errorf("%d object writes by re-applies that found no drift", n)
	}
	for _, o := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := e.c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		if rvs[typeName(o)] != o.GetResourceVersion() {
			t.Errorf("%s web was written by a re-apply with no drift", typeName(o))
		}
	}
	n := 0
	for _, ev := range e.events(cr) {
		if ev.Reason == reconciler.EventDriftCorrected {
			n += int(max(ev.Count, 1))
		}
	}
	if n != 1 {
		t.Errorf("%d DriftCorrected events, want the one of the correction", n)
	}
}

func typeName(o client.Object) string {
	switch o.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Service:
		return "Service"
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	}
	return "?"
}

// TestNullFieldsOfTheManifestAreNotDrift (issue 39): a chart that writes
// `annotations:` with nothing under it (null), as sealed-secrets does on its
// Roles, RoleBindings and Deployment. A re-apply that restores a deleted
// object of the release leaves that one alone: not named as drift, and
// Helm's ownership annotations, which the API server keeps beside the
// manifest's nothing, still on it. Before, the re-apply patched its
// annotations to null, named it "(changed)" and deleted Helm's annotations,
// after which later re-applies skipped it as someone else's.
func TestNullFieldsOfTheManifestAreNotDrift(t *testing.T) {
	e := newEnvWatching(t, scopeWatches(t, ", watchDependentResources: false"))
	ctx := context.Background()
	name := "nulls"
	cr := e.create(gadgetGVK, name, map[string]any{"label": injecting("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "-empty\n  annotations:\ndata:\n  a: b\n")})
	e.wait(gadgetGVK, name, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	e.poke(gadgetGVK, name)
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	if !strings.Contains(ev.Message, "Restored 1 objects") || strings.Contains(ev.Message, name+"-empty") {
		t.Errorf("DriftCorrected event %q: want only ConfigMap %s restored", ev.Message, name)
	}
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name + "-empty"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Annotations["meta.helm.sh/release-name"] != name {
		t.Errorf("ConfigMap %s-empty lost Helm's ownership annotations: %v", name, cm.Annotations)
	}
}

// scaleAs scales Deployment name through its scale subresource as field
// manager, as `kubectl scale` does, and returns when it was written.
func (e *env) scaleAs(name string, replicas int32, manager string) time.Time {
	e.t.Helper()
	at := time.Now()
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if err := e.c.SubResource("scale").Update(context.Background(), dep, client.WithSubResourceBody(scale), client.FieldOwner(manager)); err != nil {
		e.t.Fatalf("scaling deployment %s: %v", name, err)
	}
	return at
}

// patchDataAs sets key of ConfigMap name to value as field manager.
func (e *env) patchDataAs(name, key, value, manager string) time.Time {
	e.t.Helper()
	at := time.Now()
	b, _ := json.Marshal(map[string]any{"data": map[string]any{key: value}})
	if err := e.c.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}},
		client.RawPatch(types.MergePatchType, b), client.FieldOwner(manager)); err != nil {
		e.t.Fatalf("patching configmap %s: %v", name, err)
	}
	return at
}

// driftOf reads status.drift of the Nginx name.
func (e *env) driftOf(name string) *status.Drift {
	e.t.Helper()
	return status.FromObject(e.get(tu.NginxGVK, name)).Drift
}

// waitDrift waits until status.drift names path of kind/name with a field
// of the writer manager, and returns that field.
func (e *env) waitDrift(cr, kind, object, path, manager string) status.DriftedField {
	e.t.Helper()
	var found status.DriftedField
	tu.Eventually(e.t, time.Minute, "status.drift to name "+kind+" "+object+" "+path+" by "+manager, func() (bool, string) {
		d := e.driftOf(cr)
		if d == nil {
			return false, "no status.drift"
		}
		for _, o := range d.Objects {
			for _, f := range o.Fields {
				if o.Kind == kind && o.Name == object && f.Path == path && f.Manager == manager {
					found = f
					return true, ""
				}
			}
		}
		b, _ := json.Marshal(d)
		return false, string(b)
	})
	return found
}

// writtenAround checks that a managedFields time, to the second, is the
// second of a write made at at.
func writtenAround(t *testing.T, f status.DriftedField, at time.Time) {
	t.Helper()
	if f.Time == nil || f.Time.Before(&metav1.Time{Time: at.Truncate(time.Second)}) || f.Time.Time.After(at.Add(2*time.Second)) {
		t.Errorf("field %s: time %v, want the second of the write at %s", f.Path, f.Time, at.Format(time.RFC3339Nano))
	}
}

// The Drifted condition, status.drift and the DriftCorrected event name
// each drifted field and who changed it, from the object's managedFields:
// a scale through the scale subresource, and a ConfigMap's data key
// changed by another manager, whose value never shows. The release's
// objects are read from the operator's cache (dependent watches), which
// holds no managedFields: the drifted object is read once more, live.
func TestDriftNamesWhoChangedWhat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: e.ns, Name: "web"}

	scaled := e.scaleAs("web", 5, "tester")
	f := e.waitDrift("web", "Deployment", "web", "/spec/replicas", "tester")
	// Kubernetes records no time in the entry of a scale: the time is
	// when the operator found the drift, a dependent watch's event after it.
	if f.Subresource != "scale" || f.Operation != "Update" || !f.TimeObserved {
		t.Errorf("field %+v: want operation Update through the scale subresource, its time the drift's finding", f)
	}
	writtenAround(t, f, scaled)
	u := e.wait(tu.NginxGVK, "web", status.TypeDrifted, metav1.ConditionFalse, status.ReasonDriftCorrected)
	if msg := conditionMessage(u, status.TypeDrifted); !strings.Contains(msg, "Deployment web: /spec/replicas changed by tester (Update, scale), found at ") {
		t.Errorf("Drifted message %q does not name the field and its writer", msg)
	}
	checkContract(t, u)
	ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventDriftCorrected)
	if !strings.Contains(ev.Message, "/spec/replicas changed by tester (Update, scale)") {
		t.Errorf("DriftCorrected event %q does not name the writer", ev.Message)
	}
	tu.Eventually(t, time.Minute, "the replicas to be restored", func() (bool, string) {
		dep := &appsv1.Deployment{}
		if err := e.c.Get(ctx, key, dep); err != nil {
			return false, err.Error()
		}
		return *dep.Spec.Replicas == 2, fmt.Sprintf("replicas %d", *dep.Spec.Replicas)
	})

	const value = "tampered-page-7f3a9"
	patched := e.patchDataAs("web", "index.html", value, "alice")
	f = e.waitDrift("web", "ConfigMap", "web", "/data/index.html", "alice")
	if f.TimeObserved || f.Operation != "Update" || f.Subresource != "" {
		t.Errorf("field %+v: want alice's Update with the time managedFields record", f)
	}
	writtenAround(t, f, patched)
	tu.Eventually(t, time.Minute, "a DriftCorrected event naming alice", func() (bool, string) {
		for _, ev := range e.events(cr) {
			if ev.Reason == reconciler.EventDriftCorrected && strings.Contains(ev.Message, "ConfigMap web: /data/index.html changed by alice (Update) at ") {
				return true, ""
			}
		}
		return false, "none yet"
	})
	b, _ := json.Marshal(e.get(tu.NginxGVK, "web").Object["status"])
	evs, _ := json.Marshal(e.events(cr))
	for what, text := range map[string]string{"the status": string(b), "the events": string(evs), "the operator's log": e.logs.String()} {
		if strings.Contains(text, value) {
			t.Errorf("the changed value shows in %s", what)
		}
	}
}

// Warn mode reports drift and writes nothing; its DriftDetected warning is
// emitted once, not on every re-apply that finds the same drift. An ignore
// rule by path and manager keeps the scale out of it: neither reported
// nor corrected.
func TestDriftWarnsAndIgnores(t *testing.T) {
	t.Parallel()
	var liveReads atomic.Int64 // of ConfigMap web, past the cache
	e := newEnvWatching(t, testWatches(t, "drift: {mode: warn, ignore: [{paths: [/spec/replicas], manager: tester}]}"),
		func(c *operator.Config) {
			c.WrapLive = func(r client.Reader) client.Reader {
				return countingReader{Reader: r, count: &liveReads, kind: "ConfigMap", name: "web"}
			}
		})
	cr := e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: e.ns, Name: "web"}

	e.scaleAs("web", 5, "tester")
	e.patchDataAs("web", "index.html", "changed", "alice")
	e.waitDrift("web", "ConfigMap", "web", "/data/index.html", "alice")
	u := e.wait(tu.NginxGVK, "web", status.TypeDrifted, metav1.ConditionTrue, status.ReasonDriftDetected)
	if msg := conditionMessage(u, status.TypeDrifted); !strings.HasSuffix(msg, "not corrected (the watch's drift mode is warn)") || strings.Contains(msg, "Deployment") {
		t.Errorf("Drifted message %q: want the ConfigMap alone, not corrected in warn mode", msg)
	}
	checkContract(t, u)
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventDriftDetected)

	writes := e.objectWrites.Load()
	for i := 0; i < 2; i++ {
		gets := e.gets.Load()
		e.poke(tu.NginxGVK, "web")
		tu.Eventually(t, 30*time.Second, "the poke to be reconciled", func() (bool, string) {
			return e.gets.Load() > gets, "no reconcile yet"
		})
	}
	time.Sleep(time.Second)
	if n := e.objectWrites.Load() - writes; n != 0 {
		t.Errorf("%d object writes in warn mode", n)
	}
	n := 0
	for _, ev := range e.events(cr) {
		switch ev.Reason {
		case reconciler.EventDriftDetected:
			n += int(max(ev.Count, 1))
		case reconciler.EventDriftCorrected:
			t.Errorf("DriftCorrected event in warn mode: %q", ev.Message)
		}
	}
	if n != 1 {
		t.Errorf("%d DriftDetected events, want one for the one drift", n)
	}
	// Who changed the ConfigMap was read once: the re-applies that found
	// the same version drifted again remembered it.
	if n := liveReads.Load(); n != 1 {
		t.Errorf("ConfigMap web read %d times past the cache, want once for its one drifted version", n)
	}
	cm, dep := &corev1.ConfigMap{}, &appsv1.Deployment{}
	if err := e.c.Get(ctx, key, cm); err != nil || cm.Data["index.html"] != "changed" {
		t.Errorf("the ConfigMap was restored in warn mode: %v %v", cm.Data, err)
	}
	if err := e.c.Get(ctx, key, dep); err != nil || *dep.Spec.Replicas != 5 {
		t.Errorf("the ignored scale was undone: %v %v", dep.Spec.Replicas, err)
	}
	for _, o := range e.driftOf("web").Objects {
		if o.Kind == "Deployment" {
			t.Errorf("status.drift names the ignored scale: %+v", o)
		}
	}
}

// countingReader counts the reads of one object.
type countingReader struct {
	client.Reader
	count      *atomic.Int64
	kind, name string
}

func (r countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == r.kind && key.Name == r.name {
		r.count.Add(1)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}
