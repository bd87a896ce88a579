package release

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// DecideDeletion tells what the deletion of the resource does with its
// release (DecideDelete), gathering the facts one by one, in the table's
// order, until one decides: a fact that cannot change the plan costs no
// request. keep is the resource's helmapp.io/uninstall-on-delete "false",
// uninstalled that its status says an earlier pass uninstalled the release.
// A release whose records do not match what the operator wrote
// (CheckRecords) is neither uninstalled nor kept: the failure says so.
// note says why for DeleteNotOurs and DeleteSkip, for the UninstallSkipped
// event. reader looks up the ServiceAccount the release is uninstalled as.
func (r *Runner) DecideDeletion(ctx context.Context, reader client.Reader, keep, uninstalled bool) (plan DeletePlan, note string, err error) {
	f := DeleteFacts{Keep: keep}
	var st State
	if f.NotOurs, st, err = r.notOurs(); err != nil || f.NotOurs != "" {
		return DecideDelete(f), f.NotOurs, err
	}
	// Neither Helm's uninstall (which deletes what the latest record lists)
	// nor keeping the release (which reads what it lists to disown it) acts
	// on a record rewritten in place: the deletion waits, stalled, until it
	// is restored or deleted (trust.go).
	if err := r.CheckRecords(st); err != nil {
		return DeleteUninstall, "", err
	}
	if DecideDelete(f) != DeleteUninstall {
		return DecideDelete(f), "", nil
	}
	if r.Identity.Impersonated() {
		if note, err = r.actorGone(ctx, reader); err != nil || note != "" {
			f.ActorGone = note != ""
			return DecideDelete(f), note, err
		}
	}
	if uninstalled {
		st, err := Observe(r.Client, r.Name)
		f.Gone = err == nil && st.Latest == nil
	}
	if DecideDelete(f) == DeleteUninstall {
		// Helm's uninstall deletes what the latest record lists and runs
		// its pre- and post-delete hooks: not for a record out of scope
		// (scope.go). A kept release is checked before it is disowned.
		if err := r.RecordsInScope(st); err != nil {
			return DeleteUninstall, "", HeldDeletion(err, "the release is not uninstalled")
		}
	}
	return DecideDelete(f), "", nil
}

// HeldDeletion is err, a record out of scope found while the resource is
// deleted, saying what the deletion does not do (done) and that the
// finalizer stays until the record is removed or restored.
func HeldDeletion(err error, done string) error {
	var e *Error
	if errors.As(err, &e) && e.Reason == status.ReasonOutOfScope {
		e.Summary += "; " + done + ", and the finalizer stays until then"
	}
	return err
}

// actorGone checks that the ServiceAccount the release is uninstalled as
// exists. When it is gone and its namespace is being deleted (which deletes
// the release's objects and Helm's storage with it), the uninstall is
// skipped: note says so, and a namespace's deletion never waits on the
// operator. When it is gone from a namespace that stays, the failure is an
// UninstallError naming it.
func (r *Runner) actorGone(ctx context.Context, reader client.Reader) (note string, err error) {
	st, err := LookUpServiceAccount(ctx, reader, r.Identity)
	switch {
	case err != nil:
		return "", &Error{Reason: status.ReasonUninstallError, Action: status.ActionUninstall,
			Summary: fmt.Sprintf("Uninstall of release %s failed", r.Name), Err: err}
	case !st.Missing:
		return "", nil
	case st.NamespaceTerminating:
		return fmt.Sprintf("Release %s was not uninstalled: %s, which it is uninstalled as, is gone, and namespace %s is being deleted, which deletes the release's objects and its history",
			r.Name, r.Identity, r.Namespace), nil
	}
	return "", ServiceAccountMissing(r.Identity, status.ActionUninstall)
}
