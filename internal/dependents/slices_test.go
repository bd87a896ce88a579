package dependents_test

import (
	"context"
	"sync/atomic"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// listCounter is the real client, counting its lists.
type listCounter struct {
	client.Reader
	n atomic.Int64
}

func (c *listCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.n.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// A list whose selector requires the managed label, of a kind the cache
// watches, is answered by the cache (the EndpointSlices of a release's
// Service carry its labels); any other list is the API server's.
func TestReaderListsLabelledSlicesFromTheCache(t *testing.T) {
	c := testutil.Client(t, cfg)
	inside, outside := testutil.Namespace(t, c, "slices-in"), testutil.Namespace(t, c, "slices-out")
	managed := map[string]string{dependents.ManagedLabel: dependents.ManagedLabelValue, discoveryv1.LabelServiceName: "web"}
	for _, s := range []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Namespace: inside, Name: "web-a", Labels: managed}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: inside, Name: "web-b", Labels: managed}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: inside, Name: "other", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: outside, Name: "web-a", Labels: managed}},
	} {
		s.AddressType = discoveryv1.AddressTypeIPv4
		if err := c.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objCache, err := cache.New(cfg, cache.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper(),
		DefaultNamespaces: map[string]cache.Config{inside: {}}, DefaultLabelSelector: dependents.Selector()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = objCache.Start(ctx) }()
	gvk := schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(gvk)
	if _, err := objCache.GetInformer(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if !objCache.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	live := &listCounter{Reader: c}
	tracker := dependents.NewTracker()
	r := dependents.Reader{Cache: objCache, Live: live, Tracker: tracker}

	list := func(ctx context.Context, ns string, sel client.MatchingLabels) []string {
		t.Helper()
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind("EndpointSliceList"))
		if err := r.List(ctx, l, client.InNamespace(ns), sel); err != nil {
			t.Fatalf("listing: %v", err)
		}
		var names []string
		for _, u := range l.Items {
			names = append(names, u.GetName())
		}
		return names
	}
	steps := []struct {
		what string
		ctx  context.Context
		ns   string
		sel  client.MatchingLabels
		live int64
		want int
	}{
		{"a kind the cache does not watch yet", ctx, inside, managed, 1, 2},
		{"marked watched", ctx, inside, managed, 0, 2},
		{"a selector without the managed label", ctx, inside, client.MatchingLabels{discoveryv1.LabelServiceName: "web"}, 1, 3},
		{"a namespace the cache does not cover", ctx, outside, managed, 1, 1},
		{"a read after the operator's own write", dependents.ReadFresh(ctx), inside, managed, 1, 2},
	}
	for i, s := range steps {
		if i == 1 {
			tracker.MarkWatched(gvk)
		}
		before := live.n.Load()
		got := list(s.ctx, s.ns, s.sel)
		if n := live.n.Load() - before; n != s.live || len(got) != s.want {
			t.Errorf("%s: %d lists from the server and %v; want %d and %d slices", s.what, n, got, s.live, s.want)
		}
	}
}
