package release

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// reapply restores the objects of the deployed revision that drifted: it
// re-creates those that were deleted and patches those whose live state no
// longer holds every field the manifest sets. An object that did not drift is
// only read, so a re-apply that finds no drift writes nothing. It writes no
// new revision. It returns the objects it restored, in the manifest's order.
//
// On failure it returns an *Error with reason ReconcileError, and the objects
// restored before the failure.
func (r *Runner) reapply(ctx context.Context, st State) ([]string, error) {
	fail := func(err error) *Error {
		return &Error{Reason: status.ReasonReconcileError, Action: status.ActionReconcile,
			Summary: fmt.Sprintf("Re-applying the objects of release %s revision %d failed", r.Name, st.Deployed.Version),
			Err:     err}
	}
	if r.Kube == nil || r.KubeReader == nil {
		return nil, fail(fmt.Errorf("no Kubernetes client to re-apply with"))
	}
	objs, err := manifestObjects(st.Deployed.Manifest, r.Namespace, r.Kube)
	if err != nil {
		return nil, fail(err)
	}
	var drifted []string
	for _, want := range objs {
		what, err := r.restore(ctx, want)
		if what != "" {
			drifted = append(drifted, what)
		}
		if err != nil {
			return drifted, fail(err)
		}
	}
	return drifted, nil
}

// restore re-creates want when it is missing, and patches it when it drifted.
// It returns how it found the object ("Deployment web (changed)"), or "" when
// the object had not drifted.
func (r *Runner) restore(ctx context.Context, want *unstructured.Unstructured) (string, error) {
	name := want.GetKind() + " " + want.GetName()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(want.GroupVersionKind())
	err := r.KubeReader.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
		obj := want.DeepCopy()
		helmOwnership(obj, r.Name, r.Namespace)
		if err := r.Kube.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("re-creating %s: %w", name, err)
		}
		return name + " (deleted)", nil
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	patch, err := driftPatch(want, live)
	if err != nil {
		return "", fmt.Errorf("comparing %s with its manifest: %w", name, err)
	}
	if patch == nil {
		return "", nil
	}
	before := live.GetResourceVersion()
	if err := r.Kube.Patch(ctx, live, patch); err != nil {
		return "", fmt.Errorf("restoring %s: %w", name, err)
	}
	if live.GetResourceVersion() == before {
		// The server changed nothing: the difference was one of form (a
		// quantity written differently), not drift.
		return "", nil
	}
	return name + " (changed)", nil
}

// helmOwnership marks a re-created object as Helm marks the objects it
// creates, so that later Helm actions still take it for the release's own.
func helmOwnership(u *unstructured.Unstructured, release, namespace string) {
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l["app.kubernetes.io/managed-by"] = "Helm"
	u.SetLabels(l)
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a["meta.helm.sh/release-name"] = release
	a["meta.helm.sh/release-namespace"] = namespace
	u.SetAnnotations(a)
}
