package dependents

import "k8s.io/apimachinery/pkg/runtime/schema"

// MarkWatched marks gvk as watched by the cache, as Watcher.Ensure does.
func (t *Tracker) MarkWatched(gvk schema.GroupVersionKind) { t.markWatched(gvk) }
