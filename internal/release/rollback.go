package release

import (
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// rollback rolls the release back to target, the revision that was deployed
// before a failed upgrade: Helm writes a new revision with target's chart,
// values, manifest and labels (the chart digest, the owner labels), deploys
// it and marks the failed attempt superseded. It is never a dry run: a
// rollback is only ever run to change the release.
//
// helm-operator-plugins' action client has no rollback of its own (only the
// automatic one on upgrade failure, which this operator turns off), so it runs
// Helm's action on the client's configuration.
func (r *Runner) rollback(target *release.Release) error {
	cfg := r.Client.Config()
	if cfg == nil {
		return fmt.Errorf("the Helm client has no action configuration")
	}
	rb := action.NewRollback(cfg)
	rb.Version = target.Version
	r.rollbackOptions(rb)
	if r.Actions != nil {
		defer r.Actions.track(r.Namespace, r.Name, r.Owner.UID, status.ActionRollback)()
	}
	start := time.Now()
	err := rb.Run(r.Name)
	r.Actions.observed(r.Owner.Kind, status.ActionRollback, start, err)
	return err
}
