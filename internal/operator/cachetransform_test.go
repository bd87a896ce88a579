package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// TestCachesHoldNoManagedFields installs a resource and reads, from each of
// the operator's caches, what it holds: the resource (the manager's cache),
// a release object (the cache of labelled objects) and Helm's release record
// (metadata only). On the API server each has managedFields (Helm's and the
// operator's field managers); in the caches none has: they are the largest
// part of a small object's metadata and nothing the operator decides reads
// them (docs/performance.md, memory per resource).
func TestCachesHoldNoManagedFields(t *testing.T) {
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "cachetransform")
	ws, err := watches.Load(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	var depCache client.Reader
	mgr, err := operator.New(cfg, operator.Config{
		WatchNamespaces: []string{ns}, MaxConcurrentReconciles: 1, ReconcilePeriod: time.Hour,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", SkipNameValidation: true,
		WrapReader: func(r client.Reader) client.Reader {
			if dr, ok := r.(dependents.Reader); ok {
				depCache = dr.Cache
			}
			return r
		},
	}, ws)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator stopped with an error: %v", err)
		}
	})
	mgrCache := mgr.GetCache()
	ctx := context.Background()
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "echo", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if depCache == nil {
		t.Fatal("the operator has no cache of release objects")
	}

	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	var records corev1.SecretList
	if err := c.List(ctx, &records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil || len(records.Items) == 0 {
		t.Fatalf("Helm's release records in %s: %d, %v", ns, len(records.Items), err)
	}
	record := records.Items[0].Name
	for _, o := range []struct {
		what  string
		cache client.Reader
		obj   func() client.Object
		name  string
	}{
		{"the resource", mgrCache, func() client.Object { return newUnstructured(tu.EchoGVK) }, "echo"},
		{"the release's ConfigMap", depCache, func() client.Object { return newUnstructured(cm) }, ""},
		{"Helm's release record", mgrCache, func() client.Object {
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
			return m
		}, record},
	} {
		name := o.name
		if name == "" {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(cm.GroupVersion().WithKind("ConfigMapList"))
			if err := o.cache.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) == 0 {
				t.Fatalf("%s in the cache: %d, %v", o.what, len(list.Items), err)
			}
			name = list.Items[0].GetName()
		}
		live, cached := o.obj(), o.obj()
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, live); err != nil {
			t.Fatal(err)
		}
		if len(live.GetManagedFields()) == 0 {
			t.Fatalf("%s %s has no managedFields on the API server: the test proves nothing", o.what, name)
		}
		tu.Eventually(t, 30*time.Second, o.what+" in the operator's cache without managedFields", func() (bool, string) {
			if err := o.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cached); err != nil {
				return false, err.Error()
			}
			if mf := cached.GetManagedFields(); len(mf) > 0 {
				return false, fmt.Sprintf("%s %s has %d managedFields entries (the first by %s)", o.what, name, len(mf), mf[0].Manager)
			}
			return true, ""
		})
	}
}

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
