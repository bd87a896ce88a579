package release

import (
	"errors"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/storage"
)

// The storage's bounds and names (internal/storage, where the drivers
// write and read records within them).
const (
	// SecretDataLimit is the most data one Secret holds.
	SecretDataLimit = storage.SecretDataLimit
	// ChunkSize is the data of each chunk of a chunked revision.
	ChunkSize = storage.ChunkSize
	// ChunkedOwner is the owner label of the chunked driver's Secrets.
	ChunkedOwner = storage.ChunkedOwner
)

// StorageOwners are the owner labels of every release record this operator
// may read: Helm's Secrets and the chunked driver's.
var StorageOwners = []string{"helm", ChunkedOwner}

// RecordSelector selects the Secrets that each record one revision: Helm's
// (owner=helm) and the chunked driver's index Secrets (owner=ChunkedOwner,
// type=index), not its chunks (type=chunk, which carry no release name).
// Both carry the labels name=<release> and version=<revision>.
var RecordSelector = func() labels.Selector {
	owner, err := labels.NewRequirement("owner", selection.In, StorageOwners)
	if err != nil {
		panic(err)
	}
	notChunk, err := labels.NewRequirement("type", selection.NotIn, []string{"chunk"})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*owner, *notChunk)
}()

// RecordsOf selects the records of the release name (see RecordSelector).
func RecordsOf(name string) labels.Selector {
	r, err := labels.NewRequirement("name", selection.Equals, []string{name})
	if err != nil {
		// Not a valid label value: no record can carry it.
		return labels.Nothing()
	}
	return RecordSelector.Add(*r)
}

// TooLargeError is a revision too large for the storage it is written to,
// refused by the driver before it writes (storage.TooLargeError).
type TooLargeError = storage.TooLargeError

// tooLarge classifies e as ReleaseTooLarge when Helm's error is a revision
// too large for its Secret: stalled for this generation and chart, since a
// retry stores the same revision.
func tooLarge(e *Error) bool {
	var tl *TooLargeError
	if !errors.As(e.Err, &tl) {
		return false
	}
	e.Reason, e.StalledReason = status.ReasonReleaseTooLarge, status.ReasonReleaseTooLarge
	return true
}

// recordInvalid classifies e as ReleaseRecordInvalid when it is a record of
// the release that the storage does not read because reading it would pass
// a bound (storage.InvalidRecordError): stalled, since reading it again
// reads the same, until the record is deleted or repaired (its Secret's
// change wakes the resource).
func recordInvalid(e *Error) bool {
	var inv *storage.InvalidRecordError
	if !errors.As(e.Err, &inv) {
		return false
	}
	e.Reason, e.StalledReason = status.ReasonReleaseRecordInvalid, status.ReasonReleaseRecordInvalid
	return true
}
