package reconciler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// RecordIndex is the field index of the metadata cache of Helm's release
// records by release name ("name" label), so that a reconcile finds its
// release's records without scanning every record of the namespace.
const RecordIndex = "helmapp.io/release-name"

// RecordIndexValue is the value of RecordIndex for a record: its release
// name, none for an object that is not a release record.
func RecordIndexValue(o client.Object) []string {
	l := o.GetLabels()
	if l["name"] == "" || !ReleaseRecordSelector.Matches(labels.Set(l)) {
		return nil
	}
	return []string{l["name"]}
}

// observeRelease observes the release of runner: from the metadata cache of
// Helm's release records and the memo of settled revisions when the
// operator wires both (release.Runner.ObserveSettled: a settled release
// costs no request, or one Get of its latest record after a restart),
// else by reading its history (release.Runner.Observe).
func (r *Reconciler) observeRelease(ctx context.Context, runner *release.Runner) (release.State, error) {
	if r.opts.Records == nil || r.opts.Memo == nil {
		return runner.Observe()
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.opts.Records.List(ctx, list, client.InNamespace(runner.Namespace), client.MatchingFields{RecordIndex: runner.Name}); err != nil {
		// The cache cannot say: the history can.
		return runner.Observe()
	}
	recs := make([]release.Record, 0, len(list.Items))
	for _, it := range list.Items {
		recs = append(recs, release.Record{Key: it.Name, ResourceVersion: it.ResourceVersion, Labels: it.Labels})
	}
	st, _, err := runner.ObserveSettled(recs, r.opts.Memo)
	return st, err
}
