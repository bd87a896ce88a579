package dependents_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.StartAPIServer, func(c *controlplane.ControlPlane) { cfg = c.Config })
}

// countingReader is the real client, counting its reads.
type countingReader struct {
	client.Reader
	n atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// The Reader serves what the labelled-object cache holds, and asks the API
// server for everything else: an object not labelled, one in a namespace the
// cache does not cover, a read after the operator's own write, and a cached
// version older than one already read.
func TestReaderFallsBackToTheServer(t *testing.T) {
	c := testutil.Client(t, cfg)
	inside, outside := testutil.Namespace(t, c, "reader-in"), testutil.Namespace(t, c, "reader-out")
	labelled := map[string]string{dependents.ManagedLabel: dependents.ManagedLabelValue}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: inside, Name: "labelled", Labels: labelled}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: inside, Name: "unlabelled"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: outside, Name: "labelled", Labels: labelled}},
	} {
		if err := c.Create(context.Background(), cm); err != nil {
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
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(gvk)
	if _, err := objCache.GetInformer(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if !objCache.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	live := &countingReader{Reader: c}
	tracker := dependents.NewTracker()
	tracker.MarkWatched(gvk)
	r := dependents.Reader{Cache: objCache, Live: live, Tracker: tracker}

	read := func(ctx context.Context, ns, name string) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatalf("reading %s/%s: %v", ns, name, err)
		}
		return u
	}
	steps := []struct {
		what     string
		ctx      context.Context
		ns, name string
		live     int64
	}{
		{"a labelled object in the cache's namespace", ctx, inside, "labelled", 0},
		{"an object without the label", ctx, inside, "unlabelled", 1},
		{"an object in a namespace the cache does not cover", ctx, outside, "labelled", 1},
		{"a read after the operator's own write", dependents.ReadFresh(ctx), inside, "labelled", 1},
	}
	for _, s := range steps {
		before := live.n.Load()
		read(s.ctx, s.ns, s.name)
		if got := live.n.Load() - before; got != s.live {
			t.Errorf("%s: %d reads from the server, want %d", s.what, got, s.live)
		}
	}

	// A version newer than the cache's has been read: the cache is stale.
	u := read(ctx, inside, "labelled")
	rv, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(rv + 1000))
	tracker.Saw(gvk, u)
	before := live.n.Load()
	read(ctx, inside, "labelled")
	if live.n.Load() == before {
		t.Errorf("a cached version older than one already read was used")
	}
}

// An object the operator created is read, once, from what its create
// returned (Tracker.Created), even right after the write: the readiness
// read that follows an install costs no request. Anything else reads the
// server: a second read, an object dropped (Uncreated: a hook ran, Helm
// waited), and one of which a newer version was read since.
func TestReaderAnswersACreateWithWhatItReturned(t *testing.T) {
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "reader-created")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The cache covers another namespace: it never holds these objects.
	objCache, err := cache.New(cfg, cache.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper(),
		DefaultNamespaces: map[string]cache.Config{testutil.Namespace(t, c, "reader-other"): {}}, DefaultLabelSelector: dependents.Selector()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = objCache.Start(ctx) }()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(gvk)
	if _, err := objCache.GetInformer(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if !objCache.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	live := &countingReader{Reader: c}
	tracker := dependents.NewTracker()
	tracker.MarkWatched(gvk)
	r := dependents.Reader{Cache: objCache, Live: live, Tracker: tracker}
	fresh := dependents.ReadFresh(ctx)

	create := func(name string) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		u.Object["data"] = map[string]any{"k": "v"}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	read := func(name string, wantLive int64) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		before := live.n.Load()
		if err := r.Get(fresh, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		if got := live.n.Load() - before; got != wantLive {
			t.Errorf("reading %s: %d reads from the server, want %d", name, got, wantLive)
		}
		return u
	}

	created := create("created")
	tracker.Created(created)
	if got := read("created", 0); got.GetResourceVersion() != created.GetResourceVersion() || got.GetUID() != created.GetUID() {
		t.Errorf("read version %s, want the created %s", got.GetResourceVersion(), created.GetResourceVersion())
	}
	read("created", 1) // taken once

	dropped := create("dropped")
	tracker.Created(dropped)
	tracker.Uncreated(dropped)
	read("dropped", 1)

	// Changed since its create, and that version read: the server answers.
	changed := create("changed")
	tracker.Created(changed)
	newer := changed.DeepCopy()
	newer.Object["data"] = map[string]any{"k": "w"}
	if err := c.Update(ctx, newer); err != nil {
		t.Fatal(err)
	}
	tracker.Saw(gvk, newer)
	if got := read("changed", 1); got.GetResourceVersion() != newer.GetResourceVersion() {
		t.Errorf("read version %s, want the newer %s", got.GetResourceVersion(), newer.GetResourceVersion())
	}
}
