package release

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
)

func revision(status release.Status, chartName string, labels map[string]string) *release.Release {
	return &release.Release{Name: "web", Namespace: "ns", Version: 3, Labels: labels,
		Info:  &release.Info{Status: status},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: chartName, Version: "0.1.0"}}}
}

func TestClaimOf(t *testing.T) {
	me := Owner{Group: "web.helmapp.io", Kind: "Nginx", UID: "uid-me"}
	mine := me.labels()
	earlier := Owner{Group: "web.helmapp.io", Kind: "Nginx", UID: "uid-gone"}.labels()
	echo := Owner{Group: "web.helmapp.io", Kind: "Echo", UID: "uid-echo"}.labels()
	tests := []struct {
		name      string
		latest    *release.Release
		want      Claim
		wantWhose string
	}{
		{"no release", nil, ClaimFree, ""},
		{"uninstalled, history kept", revision(release.StatusUninstalled, "echo", echo), ClaimFree, ""},
		{"carries my UID", revision(release.StatusDeployed, "nginx", mine), ClaimOwned, ""},
		{"my failed revision", revision(release.StatusFailed, "nginx", mine), ClaimOwned, ""},
		{"left by an earlier resource of my kind and name", revision(release.StatusDeployed, "nginx", earlier), ClaimAdoptable, ""},
		{"helm CLI, same chart", revision(release.StatusDeployed, "nginx", nil), ClaimAdoptable, ""},
		{"older operator, same chart", revision(release.StatusDeployed, "nginx", map[string]string{LabelChartDigest: "x"}), ClaimAdoptable, ""},
		{"another kind's", revision(release.StatusDeployed, "echo", echo), ClaimConflict, "Release web belongs to Echo ns/web (web.helmapp.io)"},
		{"another kind's, same chart", revision(release.StatusDeployed, "nginx", echo), ClaimConflict, "Release web belongs to Echo ns/web"},
		{"another kind's, pending", revision(release.StatusPendingInstall, "echo", echo), ClaimConflict, "belongs to Echo"},
		{"helm CLI, other chart", revision(release.StatusDeployed, "echo", nil), ClaimConflict, "Release web was not made by this operator and is of chart echo, not nginx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, whose := ClaimOf(State{Latest: tt.latest}, me, "nginx")
			if got != tt.want || !strings.Contains(whose, tt.wantWhose) || (tt.wantWhose == "") != (whose == "") {
				t.Errorf("ClaimOf = %v, %q; want %v, %q", got, whose, tt.want, tt.wantWhose)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	if err := ValidateName(strings.Repeat("a", 53)); err != nil {
		t.Errorf("53 characters: %v", err)
	}
	err := ValidateName(strings.Repeat("a", 54))
	e, ok := err.(*Error)
	if !ok || e.StalledReason != "InvalidReleaseName" || !strings.Contains(e.Error(), "Helm limits release names to 53 characters and this one has 54") {
		t.Errorf("54 characters: %v", err)
	}
}
