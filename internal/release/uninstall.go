package release

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Uninstall removes the release's objects and, unless keepHistory, its
// history; with keepHistory the revision stays, marked uninstalled, so that
// its manifest still names the objects (see Lingering), and a later
// Uninstall(false) purges it. A release that is already gone is a success.
// Each pre- and post-delete hook is bounded by the runner's Timeout.
//
// On failure it returns an *Error with reason UninstallError. Helm reports a
// failed deletion of objects only as "failed to delete release" and writes the
// objects' errors to its log; Uninstall keeps that log line as the cause, so
// the status says which object could not be deleted and why.
func (r *Runner) Uninstall(keepHistory bool) error {
	cfg := r.Client.Config()
	var cause string
	if cfg != nil && cfg.Log != nil {
		forward := cfg.Log
		cfg.Log = func(format string, v ...any) {
			if strings.HasPrefix(format, "uninstall: Failed to delete release") {
				cause = fmt.Sprintf(format, v...)
			}
			forward(format, v...)
		}
		defer func() { cfg.Log = forward }()
	}
	if r.Actions != nil {
		defer r.Actions.track(r.Namespace, r.Name, r.Owner.UID, status.ActionUninstall)()
	}
	start := time.Now()
	err := r.uninstall(keepHistory)
	r.Actions.observed(r.Owner.Kind, status.ActionUninstall, start, err)
	if err == nil {
		return nil
	}
	if cause != "" {
		objs := strings.TrimPrefix(cause, "uninstall: Failed to delete release: ")
		objs = strings.TrimSuffix(strings.TrimPrefix(objs, "["), "]")
		err = fmt.Errorf("could not delete its objects: %s", objs)
	}
	e := &Error{Reason: status.ReasonUninstallError, Action: status.ActionUninstall,
		Summary: fmt.Sprintf("Uninstall of release %s failed", r.Name), Err: err}
	recordInvalid(e) // a record of its history past the storage's bounds
	return e
}

// uninstall runs Helm's uninstall; a release already gone, or already
// uninstalled when keeping history, is a success. A release Helm finds no
// record of is noted (FoundNoRecords).
func (r *Runner) uninstall(keepHistory bool) error {
	_, err := r.Client.Uninstall(r.Name, func(u *action.Uninstall) error {
		u.KeepHistory = keepHistory
		u.Timeout = r.timeout()
		r.Options.uninstall(u)
		return nil
	})
	if errors.Is(err, driver.ErrReleaseNotFound) {
		r.noRecords = true
		return nil
	}
	if keepHistory && err != nil && strings.Contains(err.Error(), "is already deleted") {
		return nil
	}
	return err
}

// FoundNoRecords tells that an Uninstall of this runner found no record of
// the release: nothing was uninstalled, and what the release holds outside
// its namespace, if anything, is left for Leftovers to find.
func (r *Runner) FoundNoRecords() bool { return r.noRecords }
