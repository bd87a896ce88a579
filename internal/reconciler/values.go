package reconciler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// ValuesFromIndex indexes the watched resources by the objects their own
// valuesFrom references ("Secret/<name>", "ConfigMap/<name>"), so that a
// change to one wakes exactly the resources that read it.
const ValuesFromIndex = "helmapp.io/values-from"

// settleWindow is how long a resource with valuesFrom waits, after the last
// change to its generation or to a referenced object it has not acted on,
// before it installs or upgrades: a spec and a Secret changed together (one
// `kubectl apply` of both) arrive within it and make one revision.
const settleWindow = time.Second

// ValuesFromIndexValue is the index function of ValuesFromIndex.
func ValuesFromIndexValue(obj client.Object) []string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	refs, err := release.ValuesReferences(u, nil)
	if err != nil {
		return nil
	}
	keys := make([]string, 0, len(refs))
	for _, ref := range refs {
		keys = append(keys, ref.Key())
	}
	return keys
}

// readValues is what valuesSources read: the sources, or the failure to
// read them, which the pass reports once it has observed the release; wait,
// when not zero, says that a change not acted on yet is younger than
// settleWindow: the reconcile then waits that long and runs nothing (see
// settler).
type readValues struct {
	sources []release.ValuesSource
	err     error
	wait    time.Duration
}

// valuesSources reads the references of obj's valuesFrom (the watch's
// first) as obj's identity, records them in out, and returns them with the
// redactor that also hides what came from Secrets; nothing at all for a
// resource without references, which costs no request.
func (r *Reconciler) valuesSources(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out *status.Outcome, redactor status.Redactor) (readValues, status.Redactor) {
	refs, err := release.ValuesReferences(obj, r.kind.ValuesFrom)
	if err != nil || len(refs) == 0 {
		if err == nil && len(prev.ValuesSources) > 0 {
			out.SourcesRead = true // valuesFrom removed: so is the list
		}
		return readValues{err: err}, redactor
	}
	if r.watchSources != nil {
		r.watchSources()
	}
	id, writer, idErr := r.identity(obj)
	if idErr != nil {
		// The pass reports the identity's failure before it needs values.
		return readValues{}, redactor
	}
	var reader client.Reader = r.svc.Live
	if writer != nil {
		reader = writer
	}
	if reader == nil {
		reader = r.svc.Reader
	}
	// Every reference the identity may not get is named at once, before
	// any is read (the status keeps the sources it last listed).
	if err := release.ReviewValuesSources(ctx, r.svc.Access, id, obj.GetNamespace(), refs); err != nil {
		return readValues{err: r.missingIdentity(ctx, id, err)}, redactor
	}
	srcs, err := release.ReadValuesSources(ctx, reader, id, obj.GetNamespace(), refs)
	out.SourcesRead, out.ValuesSources = true, statusSources(srcs)
	if err != nil {
		return readValues{err: r.missingIdentity(ctx, id, err)}, redactor
	}
	redactor = r.redactorWith(obj, release.SecretValues(srcs))
	return readValues{sources: srcs, wait: r.settle.wait(obj, prev, out.ValuesSources, r.svc.Now())}, redactor
}

// missingIdentity is err, a refused read, or, when the ServiceAccount it
// was made as does not exist (whose every request the API server refuses),
// that failure: the missing permission is not the cause.
func (r *Reconciler) missingIdentity(ctx context.Context, id release.Identity, err error) error {
	if !id.Impersonated() || !release.IsReason(err, status.ReasonPermissionDenied) {
		return err
	}
	var reader client.Reader = r.svc.Live
	if reader == nil {
		reader = r.svc.Reader
	}
	if st, lerr := release.LookUpServiceAccount(ctx, reader, id); lerr == nil && st.Missing {
		e := release.ServiceAccountMissing(id, "")
		e.Refused = true
		return e
	}
	return err
}

// statusSources is what status.valuesSources says of srcs.
func statusSources(srcs []release.ValuesSource) []status.ValuesSource {
	if len(srcs) == 0 {
		return nil
	}
	out := make([]status.ValuesSource, len(srcs))
	for i, s := range srcs {
		out[i] = status.ValuesSource{Kind: s.Ref.Kind, Name: s.Ref.Name, ValuesKey: s.Ref.ValuesKey,
			ResourceVersion: s.ResourceVersion, Found: s.Found}
	}
	return out
}

// settler holds back, for settleWindow, the install or upgrade of a
// resource with valuesFrom whose inputs (generation, the referenced
// objects' versions) changed and are not yet what its status describes: a
// change that arrives meanwhile restarts the window, so changes made
// together make one revision. Inputs the status already describes (a
// steady resource, a restarted operator) wait for nothing.
type settler struct {
	mu   sync.Mutex
	seen map[types.UID]settleMark
}

type settleMark struct {
	inputs string
	since  time.Time
}

// wait returns how long obj, whose referenced objects are srcs, still waits.
func (s *settler) wait(obj *unstructured.Unstructured, prev status.Status, srcs []status.ValuesSource, now time.Time) time.Duration {
	inputs := settleInputs(obj.GetGeneration(), srcs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[types.UID]settleMark{}
	}
	if inputs == settleInputs(prev.ObservedGeneration, prev.ValuesSources) {
		delete(s.seen, obj.GetUID())
		return 0
	}
	m, ok := s.seen[obj.GetUID()]
	if !ok || m.inputs != inputs {
		m = settleMark{inputs: inputs, since: now}
		s.seen[obj.GetUID()] = m
	}
	return max(m.since.Add(settleWindow).Sub(now), 0)
}

func (s *settler) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, uid)
}

func settleInputs(generation int64, srcs []status.ValuesSource) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(generation, 10))
	for _, s := range srcs {
		b.WriteString(";" + s.Kind + "/" + s.Name + "@" + s.ResourceVersion)
	}
	return b.String()
}

// sourceEvents handles the changes to the Secrets and ConfigMaps of the
// watched namespaces, seen by their metadata only (no data is cached): each
// created, changed or deleted one wakes at once, whatever their backoff,
// the resources whose valuesFrom references it (ValuesFromIndex), and all
// of its namespace's when the watch's own valuesFrom does. The objects
// listed when the watch starts wake nobody.
func (r *Reconciler) sourceEvents(resources client.Reader, kind string) handler.EventHandler {
	wake := func(ctx context.Context, obj client.Object, q queue) {
		key := kind + "/" + obj.GetName()
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(r.kind.GVK.GroupVersion().WithKind(r.kind.GVK.Kind + "List"))
		opts := []client.ListOption{client.InNamespace(obj.GetNamespace())}
		if !r.defaultsReference(key) {
			opts = append(opts, client.MatchingFields{ValuesFromIndex: key})
		}
		if err := resources.List(ctx, list, opts...); err != nil {
			return
		}
		for _, it := range list.Items {
			r.gate.sourceChanged(it.GetUID())
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: it.GetNamespace(), Name: it.GetName()}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			if !e.IsInInitialList {
				wake(ctx, e.Object, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				wake(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { wake(ctx, e.Object, q) },
	}
}

// defaultsReference tells whether the watch's valuesFrom references key.
func (r *Reconciler) defaultsReference(key string) bool {
	for _, ref := range r.kind.ValuesFrom {
		if ref.Key() == key {
			return true
		}
	}
	return false
}

// sourceKinds are the kinds valuesFrom references, watched by metadata.
var sourceKinds = []string{"Secret", "ConfigMap"}

// sourceObject is the metadata-only object of a source kind.
func sourceObject(kind string) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return o
}

// setupSources indexes the kind's resources by what their valuesFrom
// references and prepares the metadata watch of Secrets and ConfigMaps
// through svc.Sources, which the first reconcile of a resource with
// valuesFrom starts (watchSources): an operator whose resources reference
// nothing lists and watches nothing more. A watch that failed to start is
// tried again by the next such reconcile.
func (r *Reconciler) setupSources(mgr ctrl.Manager, c controller.Controller, obj *unstructured.Unstructured) error {
	if r.svc.Sources == nil {
		return nil
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), obj, ValuesFromIndex, ValuesFromIndexValue); err != nil {
		return fmt.Errorf("indexing %s by valuesFrom: %w", r.kind.GVK.Kind, err)
	}
	var mu sync.Mutex
	started := map[string]bool{}
	r.watchSources = func() {
		mu.Lock()
		defer mu.Unlock()
		for _, kind := range sourceKinds {
			if started[kind] {
				continue
			}
			src := source.Kind[client.Object](r.svc.Sources, sourceObject(kind), r.sourceEvents(mgr.GetCache(), kind))
			if err := c.Watch(src); err != nil {
				mgr.GetLogger().Error(err, "Watching the objects valuesFrom references failed; retried by the next reconcile", "kind", kind)
				return
			}
			started[kind] = true
		}
	}
	return nil
}
