package operator

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// valuesFromOf is the watch's valuesFrom (watches.yaml), each key defaulted.
func valuesFromOf(w watches.Watch) []release.ValuesReference {
	var out []release.ValuesReference
	for _, v := range w.ValuesFrom {
		key := v.ValuesKey
		if key == "" {
			key = release.DefaultValuesKey
		}
		out = append(out, release.ValuesReference{Kind: v.Kind, Name: v.Name, ValuesKey: key, TargetPath: v.TargetPath, Optional: v.Optional, Literal: v.Literal})
	}
	return out
}

// sourcesCache returns the cache through which the Secrets and ConfigMaps
// of the watched namespaces are watched by their metadata for valuesFrom:
// its informers start only when a resource with valuesFrom first asks
// (package reconciler), and it never holds a Secret's data.
func sourcesCache(mgr ctrl.Manager, namespaces map[string]cache.Config) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: namespaces,
		DefaultTransform:  cacheTransform,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of valuesFrom's objects: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}
