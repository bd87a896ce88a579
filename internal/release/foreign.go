package release

import (
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
)

// Foreign is a revision of the resource's release that someone else wrote
// — `helm upgrade`, `helm rollback` by hand, another process: the latest
// revision, finished (not pending), newer than every revision the
// resource's status names and than every revision this process wrote. The
// resource is the source of truth: a foreign revision is reported (the
// ForeignRevision event) and upgraded back to the resource's spec, unless
// it changed nothing the resource decides.
type Foreign struct {
	Revision    int
	Status      release.Status
	Description string
	// Same tells that it is deployed with the resource's chart and values:
	// it changed nothing the resource decides and is adopted quietly, with
	// no upgrade and no event.
	Same bool
}

// JudgeForeign tells whether the latest revision of st is foreign, known
// being the newest revision the resource's status names or this process
// wrote (0 for none: a release the resource has not described yet is
// adopted or installed, not reported), want what the resource asks for and
// chrt the watch's chart. It returns nil when the latest revision is not
// foreign.
func JudgeForeign(st State, known int, want Desired, chrt *chart.Chart) *Foreign {
	l := st.Latest
	if known == 0 || l == nil || l.Info == nil || l.Version <= known || l.Info.Status.IsPending() ||
		l.Info.Status == release.StatusUninstalled || l.Info.Status == release.StatusUninstalling {
		return nil
	}
	f := &Foreign{Revision: l.Version, Status: l.Info.Status, Description: l.Info.Description}
	// The chart's digest label cannot tell: Helm copies the labels of the
	// revision it upgrades or rolls back from. The chart itself can.
	f.Same = l.Info.Status == release.StatusDeployed && ValuesDigest(l.Config) == want.ValuesDigest &&
		l.Chart != nil && chartDigest(l.Chart, false) == chartDigest(chrt, false)
	return f
}

// Foreign judges the latest revision of st (JudgeForeign) against the
// revisions the resource's status names (Known) and those this process
// wrote, and records the verdict in st.
func (r *Runner) Foreign(st *State, want Desired) *Foreign {
	st.Foreign = JudgeForeign(*st, r.known(), want, r.Chart)
	return st.Foreign
}

// known is the newest revision the resource's status names or this process
// wrote on the release.
func (r *Runner) known() int {
	k := r.Known
	if r.Actions != nil {
		k = max(k, r.Actions.Wrote(r.Namespace, r.Name, r.Owner.UID))
	}
	return k
}
