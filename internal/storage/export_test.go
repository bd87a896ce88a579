package storage

import (
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// For the external tests of this package.

// EncodedSize is the size of a revision as Helm's Secrets driver stores it.
var EncodedSize = encodedSize

// NewHelmSecrets is the operator's own Secrets storage driver over impl,
// its time labels stamped by now (time.Now when nil).
func NewHelmSecrets(impl corev1client.SecretInterface, now func() time.Time) driver.Driver {
	d := newHelmSecrets(impl)
	if now != nil {
		d.now = now
	}
	return d
}

// StorageDriver is the operator's release storage mapper, chunked for the
// kinds in chunked.
func StorageDriver(chunked map[schema.GroupVersionKind]bool) helmclient.ObjectToStorageDriverMapper {
	return Mapper(chunked, nil)
}

// NewChunkedSecrets is the operator's own chunked Secrets storage driver
// over impl, owner helm-app-operator, in chunks of chunkSize bytes.
func NewChunkedSecrets(impl corev1client.SecretInterface, chunkSize int) driver.Driver {
	return newChunkedSecrets(impl, "helm-app-operator", chunkSize)
}
