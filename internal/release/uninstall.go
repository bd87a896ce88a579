package release

import (
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Uninstall removes the release's objects and its history. A release that is
// already gone is a success.
//
// On failure it returns an *Error with reason UninstallError.
func (r *Runner) Uninstall() error {
	_, err := r.Client.Uninstall(r.Name)
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return &Error{Reason: status.ReasonUninstallError, Action: status.ActionUninstall,
		Summary: fmt.Sprintf("Uninstall of release %s failed", r.Name), Err: err}
}
