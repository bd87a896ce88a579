package release

import "helm.sh/helm/v3/pkg/release"

// ChartChangeOnly reports whether st is a deployed release that differs from
// want only by its chart: the latest revision is deployed, written by this
// operator (or adopted as the same), with the values the resource asks for,
// and of another chart. Its upgrade is the kind of upgrade a watch's rollout
// stages (internal/rollout); any other upgrade — new values, a failed
// attempt retried, a foreign revision undone — goes ahead at once.
func ChartChangeOnly(st State, want Desired) bool {
	l := st.Latest
	return l != nil && l.Info != nil && l.Info.Status == release.StatusDeployed && st.Deployed == l &&
		(st.Foreign == nil || st.Foreign.Same) &&
		ValuesDigest(l.Config) == want.ValuesDigest && l.Labels[LabelChartDigest] != want.ChartDigest
}
