// Package managedcache is a stand-in: see the module's go.mod. Its tracking
// cache is controller-runtime's cache; it starts no watches per user, so
// operator-controller's drift detection (a re-reconcile when an object it
// applied changes) is off, and its sources never fire.
package managedcache

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// TrackingCache is a cache that watches what its users ask for.
type TrackingCache interface {
	cache.Cache
	Source(handler.EventHandler, ...predicate.Predicate) source.Source
	Watch(ctx context.Context, user client.Object, gvks sets.Set[schema.GroupVersionKind]) error
	Free(ctx context.Context, user client.Object) error
}

type trackingCache struct {
	cache.Cache
	log logr.Logger
}

// NewTrackingCache returns controller-runtime's cache of opts.
func NewTrackingCache(log logr.Logger, cfg *rest.Config, opts cache.Options) (TrackingCache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &trackingCache{Cache: c, log: log}, nil
}

// Source returns a source that never fires.
func (c *trackingCache) Source(handler.EventHandler, ...predicate.Predicate) source.Source {
	return source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error { return nil })
}

// Watch records nothing: drift watches are not part of this build.
func (c *trackingCache) Watch(_ context.Context, user client.Object, gvks sets.Set[schema.GroupVersionKind]) error {
	c.log.V(1).Info("drift watches are not part of this build", "user", client.ObjectKeyFromObject(user), "kinds", gvks.Len())
	return nil
}

// Free has nothing to free.
func (c *trackingCache) Free(context.Context, client.Object) error { return nil }
