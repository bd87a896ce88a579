package reconciler

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/rollout"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// RolloutReporter, when the Reporter implements it, is told the count of
// the kind's resources in each state of a rollout (metrics).
type RolloutReporter interface {
	RolloutResources(kind string, counts map[rollout.State]int)
}

// admitChartUpgrade is the kind's rollout's answer to the pass's question
// (release.PassHooks.Admit) on an upgrade of obj's deployed release from
// chart version from caused only by a new chart: why it waits (the deployed
// revision is re-applied meanwhile), or the slot to give back once it ran.
func (r *Reconciler) admitChartUpgrade(obj *unstructured.Unstructured) func(string) (*status.RolloutWait, func(), error) {
	return func(from string) (*status.RolloutWait, func(), error) {
		ticket, wait, err := r.rollout.Admit(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, from)
		if err != nil {
			return nil, nil, &release.Error{Reason: status.ReasonReconcileError, Summary: "Reading the rollout of the new chart from the cache failed", Err: err}
		}
		if wait != nil {
			return wait, nil, nil
		}
		return nil, func() { ticket.Done(true) }, nil
	}
}

// setupRollout makes the kind's upgrades to a new chart a staged rollout
// (watches.yaml rollout) unless the budget stages nothing: a coordinator
// that reads the manager's caches, woken by changes to the kind's
// resources, that wakes waiting resources through bld's controller.
func (r *Reconciler) setupRollout(mgr ctrl.Manager, bld *builder.Builder, selector labels.Selector) error {
	b := r.kind.Rollout
	if b == nil || b.Unbounded() {
		return nil
	}
	md := r.kind.Chart.Metadata
	wake := make(chan event.TypedGenericEvent[*unstructured.Unstructured], 1024)
	var report func(map[rollout.State]int)
	if o, ok := r.svc.Reporter.(RolloutReporter); ok {
		report = func(c map[rollout.State]int) { o.RolloutResources(r.kind.GVK.Kind, c) }
	}
	r.rollout = rollout.New(rollout.Config{
		Chart:  rollout.Chart{Name: md.Name, Version: md.Version, Digest: r.shared.ChartDigest},
		Budget: *b,
		List:   func() ([]rollout.Resource, error) { return r.rolloutResources(mgr.GetCache(), selector) },
		Wake: func(k types.NamespacedName) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(r.kind.GVK)
			u.SetNamespace(k.Namespace)
			u.SetName(k.Name)
			wake <- event.TypedGenericEvent[*unstructured.Unstructured]{Object: u}
		},
		Event: func(k types.NamespacedName, warning bool, reason, note string) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(r.kind.GVK)
			if mgr.GetCache().Get(context.Background(), k, u) != nil {
				return
			}
			typ := corev1.EventTypeNormal
			if warning {
				typ = corev1.EventTypeWarning
			}
			r.svc.Recorder.Eventf(u, nil, typ, reason, "Rollout", "%s", status.Bound(note, maxEventNote))
		},
		Observe: report,
		Now:     r.svc.Now,
	})
	if err := mgr.Add(manager.RunnableFunc(r.rollout.Start)); err != nil {
		return err
	}
	changed := func() { r.rollout.Changed() }
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.kind.GVK)
	bld.WatchesRawSource(source.Channel(wake, &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{})).
		Watches(obj, handler.Funcs{
			UpdateFunc: func(context.Context, event.UpdateEvent, queue) { changed() },
			DeleteFunc: func(context.Context, event.DeleteEvent, queue) { changed() },
		})
	return nil
}

// rolloutResources lists the kind's resources and the latest record of each
// one's release from the caches, for the rollout. Nothing here calls the API
// server.
func (r *Reconciler) rolloutResources(c client.Reader, selector labels.Selector) ([]rollout.Resource, error) {
	ctx := context.Background()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.kind.GVK.GroupVersion().WithKind(r.kind.GVK.Kind + "List"))
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	recs := &metav1.PartialObjectMetadataList{}
	recs.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.List(ctx, recs, client.MatchingLabelsSelector{Selector: ReleaseRecordSelector}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	type record struct {
		version int
		labels  map[string]string
	}
	latest := map[types.NamespacedName]record{}
	for i := range recs.Items {
		l := recs.Items[i].GetLabels()
		v, err := strconv.Atoi(l["version"])
		if err != nil || l["name"] == "" {
			continue
		}
		k := types.NamespacedName{Namespace: recs.Items[i].GetNamespace(), Name: l["name"]}
		if v > latest[k].version {
			latest[k] = record{version: v, labels: l}
		}
	}
	out := make([]rollout.Resource, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		k := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
		gen := u.GetGeneration()
		s := status.FromObject(u)
		atGen := func(t string) bool {
			c := meta.FindStatusCondition(s.Conditions, t)
			return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen && s.ObservedGeneration == gen
		}
		res := rollout.Resource{Key: k, UID: u.GetUID(),
			Held: !u.GetDeletionTimestamp().IsZero() || u.GetAnnotations()[release.AnnotationPaused] == "true" ||
				(selector != nil && !selector.Matches(labels.Set(u.GetLabels()))),
			Stalled: atGen(status.TypeStalled),
		}
		res.Held = res.Held || res.Stalled
		rec, ok := latest[k]
		if uid := rec.labels[release.LabelOwnerUID]; !ok || (uid != "" && uid != string(u.GetUID())) {
			out = append(out, res) // no release of its own yet
			continue
		}
		res.Revision, res.RecordStatus, res.RecordChartDigest = rec.version, rec.labels["status"], rec.labels[release.LabelChartDigest]
		if d := s.DeployedRelease; d != nil {
			res.DeployedChart, res.DeployedVersion = d.Chart, d.ChartVersion
			res.ReadyAtRevision = atGen(status.TypeReady) && d.Revision == rec.version
		}
		res.Failing = atGen(status.TypeReleaseFailed) && s.FailedRelease != nil && s.FailedRelease.Action == status.ActionUpgrade
		out = append(out, res)
	}
	return out, nil
}
