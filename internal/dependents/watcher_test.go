package dependents_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkhandler "github.com/operator-framework/operator-lib/handler"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// startedController is a controller that has started: a source given to
// Watch is started at once on its queue, as controller-runtime's does
// for a watch added after the start (and, like it, not waited for).
type startedController struct {
	controller.Controller
	ctx context.Context
	q   workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (c *startedController) Watch(src source.TypedSource[reconcile.Request]) error {
	return src.Start(c.ctx, c.q)
}

// slowFirstList delays the first request of the cluster's ClusterRoles (the
// informer's list, or its watch that streams the list) by delay: a loaded
// API server, or a loaded operator, answering late.
type slowFirstList struct {
	next  http.RoundTripper
	delay time.Duration
	done  atomic.Bool
}

func (s *slowFirstList) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/clusterroles") && s.done.CompareAndSwap(false, true) {
		time.Sleep(s.delay)
	}
	return s.next.RoundTrip(r)
}

// TestEnsureReturnsOnceTheNewWatchListed: an object of a release deleted
// right after the reconcile that started its kind's watch (Ensure) is seen
// deleted, and wakes its owner, however late the watch's first list comes.
// Before, Ensure returned at once; a list that came after the deletion held
// no object and no event said it was gone, so nothing woke the owner until
// its periodic reconcile (TestDeletedClusterScopedObjectWakesItsResource
// timed out under load in CI).
func TestEnsureReturnsOnceTheNewWatchListed(t *testing.T) {
	c := testutil.Client(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	slowCfg := rest.CopyConfig(cfg)
	slowCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &slowFirstList{next: rt, delay: 2 * time.Second} })
	objCache, err := cache.New(slowCfg, cache.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper(), DefaultLabelSelector: dependents.Selector()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = objCache.Start(ctx) }()
	if !objCache.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}

	ownerGVK := schema.GroupVersionKind{Group: "web.helmapp.io", Version: "v1alpha1", Kind: "Nginx"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name:   "ensure-waits-for-the-list",
		Labels: map[string]string{dependents.ManagedLabel: dependents.ManagedLabelValue},
		Annotations: map[string]string{
			sdkhandler.TypeAnnotation:           ownerGVK.GroupKind().String(),
			sdkhandler.NamespacedNameAnnotation: "demo/web",
		}}}
	if err := c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), role) })
	gvk := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	tracker := dependents.NewTracker()
	// The install read it: its creation wakes nobody.
	tracker.Saw(gvk, role)

	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	w := dependents.NewWatcher(objCache, &startedController{ctx: ctx, q: q}, tracker, c.Scheme(), c.RESTMapper(), ownerGVK)
	if err := w.Ensure([]schema.GroupVersionKind{gvk}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, role); err != nil {
		t.Fatal(err)
	}

	got := make(chan reconcile.Request, 1)
	go func() {
		if req, shutdown := q.Get(); !shutdown {
			got <- req
		}
	}()
	select {
	case req := <-got:
		if req.Namespace != "demo" || req.Name != "web" {
			t.Errorf("the deletion woke %s, want demo/web", req)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ClusterRole's deletion right after Ensure woke no one")
	}
}
