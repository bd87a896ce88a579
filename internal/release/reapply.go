package release

import (
	"fmt"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// reapply re-applies the objects of the deployed revision, creating those that
// were deleted and patching those that drifted; it writes no new revision.
//
// On failure it returns an *Error with reason ReconcileError.
func (r *Runner) reapply(st State) error {
	if err := r.Client.Reconcile(st.Deployed); err != nil {
		return &Error{Reason: status.ReasonReconcileError, Action: status.ActionReconcile,
			Summary: fmt.Sprintf("Re-applying the objects of release %s revision %d failed", r.Name, st.Deployed.Version),
			Err:     err}
	}
	return nil
}
