package dependents

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader reads the objects of the releases from the cache of labelled
// objects where it can, and from the API server (Live) otherwise:
//
//   - objects of a kind the cache does not watch, and anything that is not an
//     *unstructured.Unstructured (a metadata-only read, a typed list of pods)
//     are read live, so that no informer is ever started by a read;
//   - an object the cache does not hold (not labelled: made before the
//     operator labelled objects, or by another tool; in a namespace the
//     cache does not cover) is read live;
//   - a cached object older than a version a reconcile already read, and
//     every read in a context from ReadFresh, is read live;
//   - except that an object this process created, kept by Tracker.Created,
//     is answered with what the create returned, or with the cache's copy
//     when that is as new, in a fresh context too: it is what a read right
//     after the write would return.
//
// Every object read is recorded in the Tracker.
type Reader struct {
	Cache   client.Reader
	Live    client.Reader
	Tracker *Tracker
}

var _ client.Reader = Reader{}

// Get reads one object.
func (r Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || r.Cache == nil || r.Tracker == nil {
		return r.Live.Get(ctx, key, obj, opts...)
	}
	gvk := u.GroupVersionKind()
	if r.Tracker.isWatched(gvk) {
		cached := &unstructured.Unstructured{}
		cached.SetGroupVersionKind(gvk)
		// Any failure of the cache (the object is not there, or in a
		// namespace the cache does not cover) leaves the answer to the server.
		var held *unstructured.Unstructured
		if err := r.Cache.Get(ctx, key, cached, opts...); err == nil {
			held = cached
		}
		// The object as this process' create returned it, or the cache's
		// copy when that is as new: what the server holds now, as fresh
		// as a read after the write (Tracker.Created).
		if c := r.Tracker.takeCreated(gvk, key, held); c != nil {
			u.Object = c.Object
			r.Tracker.Saw(gvk, u)
			return nil
		}
		if held != nil && !fresh(ctx) && !r.Tracker.stale(gvk, cached) {
			u.Object = cached.Object
			r.Tracker.Saw(gvk, u)
			return nil
		}
	}
	if err := r.Live.Get(ctx, key, u, opts...); err != nil {
		return err
	}
	u.SetGroupVersionKind(gvk)
	r.Tracker.Saw(gvk, u)
	return nil
}

// List reads live, except a list the cache can answer whole: of
// *unstructured.Unstructured objects of a kind the cache watches, whose
// label selector requires ManagedLabel (the cache holds every object that
// carries it, in the namespaces it covers), outside a context from
// ReadFresh. Readiness lists a release's Service's EndpointSlices that way:
// they carry the Service's labels. A list from the cache that holds a
// version older than one a reconcile has read, or that the cache cannot
// answer (a namespace it does not cover), is read live. Every object listed
// is recorded in the Tracker.
func (r Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok || r.Cache == nil || r.Tracker == nil || fresh(ctx) {
		return r.Live.List(ctx, list, opts...)
	}
	gvk := ul.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if !r.Tracker.isWatched(gvk) || !requiresManaged(lo.LabelSelector) {
		return r.Live.List(ctx, list, opts...)
	}
	cached := &unstructured.UnstructuredList{}
	cached.SetGroupVersionKind(ul.GroupVersionKind())
	if err := r.Cache.List(ctx, cached, opts...); err == nil && !r.anyStale(gvk, cached.Items) {
		cached.DeepCopyInto(ul)
	} else if err := r.Live.List(ctx, list, opts...); err != nil {
		return err
	}
	for i := range ul.Items {
		r.Tracker.Saw(gvk, &ul.Items[i])
	}
	return nil
}

// anyStale tells whether one of items is older than a version a reconcile
// has read.
func (r Reader) anyStale(gvk schema.GroupVersionKind, items []unstructured.Unstructured) bool {
	for i := range items {
		if r.Tracker.stale(gvk, &items[i]) {
			return true
		}
	}
	return false
}

// requiresManaged tells whether sel selects only objects labelled
// ManagedLabel=ManagedLabelValue.
func requiresManaged(sel labels.Selector) bool {
	if sel == nil {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, req := range reqs {
		if req.Key() != ManagedLabel {
			continue
		}
		vals := req.Values()
		if (req.Operator() == selection.Equals || req.Operator() == selection.DoubleEquals ||
			(req.Operator() == selection.In && vals.Len() == 1)) && vals.Has(ManagedLabelValue) {
			return true
		}
	}
	return false
}
