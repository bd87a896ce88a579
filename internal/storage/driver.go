package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Mapper returns the mapper that builds each action configuration's
// release storage, by the watch of the resource's kind (storage; chunked
// holds the kinds whose watch says chunked):
//
//   - secrets (the default): our own driver writing Helm's Secrets format
//     byte for byte (helmSecrets), one Secret per revision, which refuses a
//     revision too large for its Secret before it writes it
//     (TooLargeError), so that Helm stops before it applies
//     anything;
//   - chunked: our own chunked Secrets driver (chunkedSecrets), in
//     helm-operator-plugins' format, which writes every revision in an
//     order safe from a crash at any write, reading the kind's releases from both drivers so that
//     those stored before the switch are kept (see layered).
//
// Both put a controller owner reference to the resource on the Secrets that
// name a revision (the chunk Secrets are owned by their index Secret). wrap,
// when set, wraps the result (Config.WrapStorage).
func Mapper(chunked map[schema.GroupVersionKind]bool, wrap func(driver.Driver) driver.Driver) helmclient.ObjectToStorageDriverMapper {
	return func(ctx context.Context, obj client.Object, cfg *rest.Config) (driver.Driver, error) {
		cs, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("creating the Secrets client of the release storage: %w", err)
		}
		owner := metav1.NewControllerRef(obj, obj.GetObjectKind().GroupVersionKind())
		plain := helmclient.NewOwnerRefSecretClient(cs.Secrets(obj.GetNamespace()), []metav1.OwnerReference{*owner}, helmclient.MatchAllSecrets)
		hs := newHelmSecrets(plain)
		if l, err := logr.FromContext(ctx); err == nil {
			hs.log = l
		}
		var d driver.Driver = hs
		if chunked[obj.GetObjectKind().GroupVersionKind()] {
			cd, sc := chunkedDriver(obj, cs)
			if l, err := logr.FromContext(ctx); err == nil {
				cd.log = l
			}
			d = layered{Driver: cd, previous: d, secrets: sc}
		}
		if wrap != nil {
			d = wrap(d)
		}
		return d, nil
	}
}

// chunkedDriver is our chunked Secrets driver in obj's namespace, with
// chunks of ChunkSize, at most MaxChunks(ChunkSize) of them. It returns the
// driver's Secrets client too.
func chunkedDriver(obj client.Object, cs corev1client.CoreV1Interface) (*chunkedSecrets, corev1client.SecretInterface) {
	owner := metav1.NewControllerRef(obj, obj.GetObjectKind().GroupVersionKind())
	sc := helmclient.NewOwnerRefSecretClient(cs.Secrets(obj.GetNamespace()), []metav1.OwnerReference{*owner},
		func(s *corev1.Secret) bool { return s.Type == chunkedIndexType })
	return newChunkedSecrets(sc, ChunkedOwner, ChunkSize), sc
}

// encodedSize is the size of rls as Helm's Secrets driver stores it: the
// base64 of its gzipped JSON, the one value of the Secret's data.
func encodedSize(rls *helmrelease.Release) (int, error) {
	b, err := encodeRelease("", rls)
	return len(b), err
}

// layered is the storage of a kind switched to another driver: revisions
// are written to the new driver (the embedded one) and read from both, so
// that those written before the switch stay in the history, and a record
// stays in the driver that holds it when Helm updates it (marks it
// superseded) or deletes it (MaxHistory, uninstall). Both drivers name a
// revision's Secret by its key, so a key is in one of them only.
type layered struct {
	driver.Driver
	previous driver.Driver
	// secrets reads the records' Secrets, to tell whose a record is.
	secrets corev1client.SecretInterface
}

// Get reads key from the driver that holds it.
func (l layered) Get(key string) (*helmrelease.Release, error) {
	d, err := l.holder(key)
	if err != nil {
		return nil, err
	}
	return d.Get(key)
}

func (l layered) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	newer, err := l.Driver.List(filter)
	if err != nil {
		return nil, err
	}
	older, err := l.previous.List(filter)
	if err != nil {
		return nil, err
	}
	return union(newer, older), nil
}

// Query asks both drivers (each its own copy of the labels: the chunked
// driver rewrites owner=helm in the map it is given).
func (l layered) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	newer, err := l.Driver.Query(maps.Clone(labels))
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, err
	}
	older, err := l.previous.Query(maps.Clone(labels))
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, err
	}
	all := union(newer, older)
	if len(all) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return all, nil
}

func (l layered) Update(key string, rls *helmrelease.Release) error {
	d, err := l.holder(key)
	if err != nil {
		return err
	}
	return d.Update(key, rls)
}

func (l layered) Delete(key string) (*helmrelease.Release, error) {
	d, err := l.holder(key)
	if err != nil {
		return nil, err
	}
	return d.Delete(key)
}

// holder is the driver whose record key is, by the type of the Secret of
// that name: Helm's type is the previous driver's, any other the new one's,
// and a missing one is the new driver's to report. (Each driver fails on the
// other's records.)
func (l layered) holder(key string) (driver.Driver, error) {
	s, err := l.secrets.Get(context.Background(), key, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return l.Driver, nil
	case err != nil:
		return nil, fmt.Errorf("reading the release record %s: %w", key, err)
	case s.Type == helmSecretType:
		return l.previous, nil
	}
	return l.Driver, nil
}

// helmSecretType is the type of the Secrets of Helm's own driver.
const helmSecretType corev1.SecretType = "helm.sh/release.v1"

// union is newer's releases and those of older that newer lacks (by
// revision).
func union(newer, older []*helmrelease.Release) []*helmrelease.Release {
	seen := map[string]bool{}
	out := make([]*helmrelease.Release, 0, len(newer)+len(older))
	for _, rs := range [][]*helmrelease.Release{newer, older} {
		for _, r := range rs {
			k := r.Name + "." + strconv.Itoa(r.Version)
			if !seen[k] {
				seen[k] = true
				out = append(out, r)
			}
		}
	}
	return out
}
