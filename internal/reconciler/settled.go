package reconciler

import (
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
