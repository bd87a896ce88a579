package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// runner returns the release runner of obj, whose status is prev, or an
// ErrorGettingClient failure. Without the ServiceAccount the policy
// requires, or naming one while ServiceAccounts are off, it also returns
// the ServiceAccountRequired or ServiceAccountsDisabled failure (see
// identity).
func (r *Reconciler) runner(ctx context.Context, obj *unstructured.Unstructured, prev status.Status) (*release.Runner, error) {
	id, writer, idErr := r.identity(obj)
	if idErr != nil && !release.IsIdentityRefused(idErr) {
		return nil, idErr
	}
	ac, err := r.svc.ActionClientGetter.ActionClientFor(ctx, obj)
	if err != nil {
		return nil, &release.Error{Reason: status.ReasonErrorGettingClient,
			Summary: fmt.Sprintf("Getting the Helm client for release %s failed", obj.GetName()), Err: err}
	}
	ann, err := release.ParseAnnotations(obj.GetAnnotations())
	if err != nil {
		return nil, err
	}
	return &release.Runner{
		Shared: r.shared, Client: ac,
		Name: obj.GetName(), Namespace: obj.GetNamespace(),
		Owner:    release.Owner{Group: r.kind.GVK.Group, Kind: r.kind.GVK.Kind, UID: obj.GetUID()},
		Identity: id, Writer: writer, Options: ann.Helm,
		Known: knownRevision(prev), Recorded: prev.DeployedRelease, Generation: obj.GetGeneration(),
		Shard: r.shard(obj),
	}, idErr
}
