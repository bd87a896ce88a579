package reconciler

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// identity returns who obj's Helm actions act as, by Options.Identity (the
// ActionClientGetter's configuration impersonates the same ServiceAccount;
// the zero policy: the operator itself), and the client that writes what a
// re-apply restores as it (nil for the operator's own). Options.Access
// checks that identity's permissions before each install, upgrade and
// re-apply (nil checks nothing).
//
// A resource without the ServiceAccount the policy requires gets the
// operator's own identity with the ServiceAccountRequired failure: its
// runner may only read Helm's storage, which a deletion needs to tell
// whether anything is to be uninstalled.
func (r *Reconciler) identity(obj *unstructured.Unstructured) (release.Identity, client.Client, error) {
	id, err := r.kind.Identity.For(obj)
	if err != nil || !id.Impersonated() || r.svc.Writers == nil {
		return id, nil, err
	}
	w, err := r.svc.Writers(id)
	if err != nil {
		return id, nil, &release.Error{Reason: status.ReasonErrorGettingClient,
			Summary: fmt.Sprintf("Getting the client of %s for release %s failed", id, obj.GetName()), Err: err}
	}
	return id, w, nil
}
