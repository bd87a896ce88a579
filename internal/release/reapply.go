package release

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// reapply restores the objects of the deployed revision that drifted: it
// re-creates those that were deleted and patches those whose live state no
// longer holds every field the manifest sets. An object that did not drift is
// only read, so a re-apply that finds no drift writes nothing (and checks no
// permission). Objects are read with KubeReader, the operator's, and
// written with Writer, as Identity, once Access allows every write. It
// writes no new revision. It records in res the objects it restored, in the
// manifest's order (Drifted), those it left alone (Skipped, see inspect),
// and what drifted, field by field with the writer of each (Drift, see
// explain).
//
// The kind's DriftPolicy decides what is done: DriftOff reads nothing,
// DriftWarn reports the drift and writes nothing, and the differences its
// ignore rules match are neither restored nor reported.
//
// Only the release's own objects are restored: an object the manifest
// lists that exists without this release's Helm ownership annotations
// (meta.helm.sh/release-name and release-namespace) is someone else's and
// is never patched, and a missing object is re-created only when the
// deployed record is one the operator vouches for (Trusted), so that a
// record it did not write cannot make it create or take over objects.
//
// On failure it returns an *Error with reason ReconcileError (or
// PermissionDenied), and records the objects restored before the failure.
func (r *Runner) reapply(ctx context.Context, st State, res *Result) error {
	fail := func(err error) *Error {
		return &Error{Reason: status.ReasonReconcileError, Action: status.ActionReconcile,
			Summary: fmt.Sprintf("Re-applying the objects of release %s revision %d failed", r.Name, st.Deployed.Version),
			Err:     err}
	}
	mode := r.Drift.mode()
	if mode == DriftOff {
		return nil
	}
	if r.Kube == nil || r.KubeReader == nil {
		return fail(fmt.Errorf("no Kubernetes client to re-apply with"))
	}
	objs, err := manifestObjects(st.Deployed.Manifest, r.Namespace, r.Kube)
	if err != nil {
		return fail(err)
	}
	trusted := r.Trusted(st.Deployed)
	var writes []restoration
	found := &status.DriftFound{}
	for _, want := range objs {
		w, skip, err := r.inspect(ctx, want, trusted, st.Deployed.Version)
		if err != nil {
			return fail(err)
		}
		if skip != "" {
			res.Skipped = append(res.Skipped, skip)
		}
		if w != nil {
			writes = append(writes, *w)
			found.Objects = append(found.Objects, w.found)
		}
	}
	res.DriftChecked = true
	if len(writes) == 0 {
		return nil
	}
	res.Drift = found
	if mode == DriftWarn {
		return nil
	}
	if err := r.confirmLatest(st); err != nil {
		return err
	}
	if r.Access != nil {
		var perms []Permission
		for _, w := range writes {
			if p, ok := r.permission(w.obj); ok {
				p.Verb = w.verb
				perms = append(perms, p)
			}
		}
		if err := r.check(ctx, status.ActionReconcile, perms); err != nil {
			return err
		}
	}
	restored := found.Objects[:0:0]
	for _, w := range writes {
		what, err := r.restore(ctx, w)
		if what != "" {
			res.Drifted = append(res.Drifted, what)
			restored = append(restored, w.found)
		}
		if err != nil {
			// What was not restored still stands: reported, not corrected.
			e := fail(err)
			return r.permissionDenied(e)
		}
	}
	// An object the server did not change differed only in form (a
	// quantity written differently): it did not drift.
	found.Objects, found.Corrected = restored, true
	if len(restored) == 0 {
		res.Drift = nil
	}
	return nil
}

// restoration is one write a re-apply makes: create a deleted object, or
// patch a changed one; found is what drifted.
type restoration struct {
	verb  string // "create" or "patch"
	obj   *unstructured.Unstructured
	patch client.Patch
	name  string
	found status.DriftedObject
}

// inspect reads want's live object and returns the write that restores it,
// nil when it did not drift (or drifted only in what the kind's drift
// policy ignores). An object it must leave alone — one that exists without
// this release's ownership annotations, or one missing while the deployed
// record is not trusted — is returned as skip, named with why.
func (r *Runner) inspect(ctx context.Context, want *unstructured.Unstructured, trusted bool, revision int) (w *restoration, skip string, err error) {
	name := want.GetKind() + " " + want.GetName()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(want.GroupVersionKind())
	err = r.KubeReader.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
		if !trusted {
			return nil, objectName(want) + " (missing; not re-created: the deployed record is not one the operator vouches for)", nil
		}
		if err := r.reshardObject(ctx, want, nil); err != nil {
			return nil, "", err
		}
		obj := want.DeepCopy()
		helmOwnership(obj, r.Name, r.Namespace)
		found := driftedObject(want)
		found.Deleted = true
		return &restoration{verb: "create", obj: obj, name: name, found: found}, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("reading %s: %w", name, err)
	}
	if !ownedBy(live, r.Name, r.Namespace) {
		return nil, objectName(want) + " (not the release's: it lacks the release's Helm ownership annotations)", nil
	}
	if err := r.reshardObject(ctx, want, live); err != nil {
		return nil, "", err
	}
	patch, err := driftPatch(want, live)
	if err != nil {
		return nil, "", fmt.Errorf("comparing %s with its manifest: %w", name, err)
	}
	if patch == nil {
		return nil, "", nil
	}
	w, err = r.explain(ctx, want, live, revision)
	return w, "", err
}

// ownedBy tells whether u carries the Helm ownership annotations of release
// name in namespace, as Helm sets them on every object it creates or adopts
// (and helmOwnership on those a re-apply re-creates).
func ownedBy(u *unstructured.Unstructured, name, namespace string) bool {
	a := u.GetAnnotations()
	return a["meta.helm.sh/release-name"] == name && a["meta.helm.sh/release-namespace"] == namespace
}

// objectName names u by kind, namespace and name ("ConfigMap b/extra").
func objectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + " " + u.GetName()
	}
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// restore makes the write w. It returns how it found the object
// ("Deployment web (changed)"), or "" when the server changed nothing.
func (r *Runner) restore(ctx context.Context, w restoration) (string, error) {
	writer := r.Writer
	if writer == nil {
		writer = r.Kube
	}
	if w.verb == "create" {
		if err := writer.Create(ctx, w.obj); err != nil {
			return "", fmt.Errorf("re-creating %s: %w", w.name, err)
		}
		return w.name + " (deleted)", nil
	}
	before := w.obj.GetResourceVersion()
	if err := writer.Patch(ctx, w.obj, w.patch); err != nil {
		return "", fmt.Errorf("restoring %s: %w", w.name, err)
	}
	if w.obj.GetResourceVersion() == before {
		// The server changed nothing: the difference was one of form (a
		// quantity written differently), not drift.
		return "", nil
	}
	return w.name + " (changed)", nil
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

// StaleView is the failure of a re-apply that found Helm's storage no longer
// as the pass observed it: the pass observed the release from the cache of
// Helm's records (and the memo of settled revisions), which lags behind the
// API server after a watch broke or while an event is on its way, and a
// revision was written meanwhile (a helm upgrade by hand still running, a
// rollback, an uninstall). Nothing was written; the pass observes Helm's
// storage itself and goes on from there (Pass.run).
type StaleView struct {
	// Observed and Found are the latest revision and its status as the pass
	// observed them and as Helm's storage holds them (0 and "" for none).
	Observed, Found     int
	ObservedAs, FoundAs string
}

func (e *StaleView) Error() string {
	return fmt.Sprintf("the cached view of Helm's storage showed revision %d %s as the latest, Helm's storage holds revision %d %s",
		e.Observed, e.ObservedAs, e.Found, e.FoundAs)
}

// confirmLatest reads the release's history from Helm's storage (one list)
// before a re-apply writes, and returns a *StaleView when its latest
// revision is not the one st observed: objects are restored to the deployed
// revision only while it is still the latest, never over a revision someone
// else is writing or wrote. It is called only once drift was found, so a
// re-apply that finds none costs no request.
func (r *Runner) confirmLatest(st State) error {
	fresh, err := Observe(r.Client, r.Name)
	if err != nil {
		return err
	}
	v, s := revisionOf(st.Latest)
	fv, fs := revisionOf(fresh.Latest)
	if v != fv || s != fs {
		return &StaleView{Observed: v, ObservedAs: s, Found: fv, FoundAs: fs}
	}
	return nil
}

// revisionOf is rel's version and status, 0 and "" for none.
func revisionOf(rel *release.Release) (int, string) {
	if rel == nil {
		return 0, ""
	}
	if rel.Info == nil {
		return rel.Version, ""
	}
	return rel.Version, rel.Info.Status.String()
}

// isStale tells whether err is a re-apply's StaleView.
func isStale(err error) bool {
	var s *StaleView
	return errors.As(err, &s)
}
