package release

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// Disowner takes a deleted resource's owner references off its release, so
// that the garbage collector leaves the release behind when the resource
// keeps it (helmapp.io/uninstall-on-delete: "false").
type Disowner struct {
	// Reader reads the objects' and Helm's storage Secrets' metadata.
	Reader client.Reader
	// Mapper resolves the kinds of the manifests' objects.
	Mapper meta.RESTMapper
	// Objects writes the release's objects (as the release's identity);
	// Storage writes Helm's storage Secrets (as the operator).
	Objects, Storage client.Client
}

// Disown removes the owner references to owner from the objects of st's
// deployed and latest revisions of release name in namespace ns, and from
// the release's storage Secrets, and returns how many objects it changed.
// Other owner references stay.
func (d Disowner) Disown(ctx context.Context, st State, ns, name string, owner types.UID) (int, error) {
	var metas []*metav1.PartialObjectMetadata
	seen := map[readiness.ObjectRef]bool{}
	var manifests []string
	if st.Deployed != nil {
		manifests = append(manifests, st.Deployed.Manifest)
	}
	if st.Latest != nil {
		manifests = append(manifests, st.Latest.Manifest)
	}
	for _, manifest := range manifests {
		refs, err := readiness.ObjectsFromManifest(manifest, ns, d.Mapper)
		if err != nil {
			return 0, err
		}
		for _, ref := range refs {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(ref.GroupVersionKind())
			err := d.Reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, m)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("reading %s: %w", ref, err)
			}
			metas = append(metas, m)
		}
	}
	// Helm's storage: one Secret per revision, labelled owner=helm,
	// name=<release> (or the chunked storage's index Secret; its chunks are
	// owned by the index).
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := d.Reader.List(ctx, secrets, client.InNamespace(ns),
		client.MatchingLabelsSelector{Selector: RecordsOf(name)}); err != nil {
		return 0, fmt.Errorf("listing the release's storage Secrets: %w", err)
	}
	objects := len(metas)
	for i := range secrets.Items {
		s := &secrets.Items[i]
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		metas = append(metas, s)
	}
	n := 0
	for i, m := range metas {
		w := d.Objects
		if i >= objects {
			w = d.Storage
		}
		changed, err := dropOwner(ctx, w, m, owner)
		if err != nil {
			return n, err
		}
		if changed {
			n++
		}
	}
	return n, nil
}

// dropOwner removes the owner reference to uid from m, with an optimistic
// lock so that a concurrent change to the owner references is not lost.
func dropOwner(ctx context.Context, w client.Client, m *metav1.PartialObjectMetadata, uid types.UID) (bool, error) {
	refs := m.GetOwnerReferences()
	kept := make([]metav1.OwnerReference, 0, len(refs))
	for _, ref := range refs {
		if ref.UID != uid {
			kept = append(kept, ref)
		}
	}
	if len(kept) == len(refs) {
		return false, nil
	}
	base := m.DeepCopy()
	m.SetOwnerReferences(kept)
	if err := w.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("removing the owner reference from %s %s: %w", m.Kind, m.GetName(), err)
	}
	return true, nil
}

// Lingering returns "Kind/name" of each object of the uninstalled revision
// rel (of namespace ns) that still exists. An object Helm keeps on uninstall
// (helm.sh/resource-policy: keep) is not waited for.
//
// On failure it returns an *Error with reason ReconcileError.
func Lingering(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, rel *release.Release, ns string) ([]string, error) {
	refs, err := readiness.ObjectsFromManifest(rel.Manifest, ns, mapper)
	if err != nil {
		return nil, &Error{Reason: status.ReasonReconcileError, Action: status.ActionUninstall,
			Summary: fmt.Sprintf("Reading the objects of uninstalled release %s failed", rel.Name), Err: err}
	}
	var left []string
	for _, ref := range refs {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(ref.GroupVersionKind())
		err := reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, m)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, &Error{Reason: status.ReasonReconcileError, Action: status.ActionUninstall,
				Summary: fmt.Sprintf("Checking that the objects of release %s are gone failed", rel.Name), Err: err}
		case m.GetAnnotations()["helm.sh/resource-policy"] == "keep":
			continue
		}
		left = append(left, ref.Kind+"/"+ref.Name)
	}
	return left, nil
}
