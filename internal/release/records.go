package release

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// SecretDataLimit is the most data the API server accepts in one Secret
// (1 MiB, the sum of its values): the bound of a revision Helm stores in one.
const SecretDataLimit = 1 << 20

// ChunkSize is the data of each chunk of a chunked revision. It leaves 8 KiB
// of the Secret for what the index Secret holds beside its chunk (the names
// of the other chunks): with 1 MiB chunks the index itself is refused
// (operator-controller #2702). It must never grow past SecretDataLimit less
// that room.
const ChunkSize = (1024 - 8) * 1024

// ChunkedOwner is the owner label of the chunked driver's Secrets (Helm's
// are owner=helm, which the helm CLI lists and would fail to decode these).
const ChunkedOwner = "helm-app-operator"

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

// TooLargeError is a revision too large for the one Secret Helm's storage
// driver would write it to. The driver refuses it before writing, so Helm
// stops before it applies anything.
type TooLargeError struct {
	// Key is the revision's storage key (sh.helm.release.v1.<name>.v<revision>).
	Key string
	// Size is the revision's size as Helm encodes it, Limit the bound.
	Size, Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the revision is %d bytes as Helm stores it (%s), over the %d bytes a Secret holds; "+
		"set `storage: chunked` on this kind's entry in watches.yaml to store its releases in several Secrets", e.Size, e.Key, e.Limit)
}

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
