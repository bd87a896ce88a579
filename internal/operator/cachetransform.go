package operator

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// cacheTransform is applied to every object before it is stored in one of
// the operator's caches (the watched resources, Helm's release records by
// their metadata, the release's objects). It drops metadata.managedFields:
// nothing the operator decides reads them (the drift check compares the
// manifest's fields, readiness reads status; who changed a drifted object
// is read live, from that object alone), and they are often the largest
// part of a small object's metadata: each writer of an object, Helm, the
// operator's status patches and the API server's own controllers, adds an
// entry with the set of fields it owns. An update built from a cached object
// sends no managedFields, which the API server reads as "keep them as they
// are", so nothing is lost on the server.
var cacheTransform = cache.TransformStripManagedFields()
