package release

import (
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Labels that record, on every revision this operator writes, which resource
// the release belongs to. Helm keeps them on the release record (its storage
// Secret), so any later reader can tell whose release it is.
const (
	LabelOwnerGroup = "helmapp.io/owner-group"
	LabelOwnerKind  = "helmapp.io/owner-kind"
	LabelOwnerUID   = "helmapp.io/owner-uid"
)

// Owner is the identity of the resource a release belongs to.
type Owner struct {
	Group, Kind string
	UID         types.UID
}

// labels are the owner labels of o.
func (o Owner) labels() map[string]string {
	return map[string]string{LabelOwnerGroup: o.Group, LabelOwnerKind: o.Kind, LabelOwnerUID: string(o.UID)}
}

// Claim is what a resource may do with the release of its name.
type Claim int

const (
	// ClaimFree: no release holds the name (or it was uninstalled); installing it is ours to do.
	ClaimFree Claim = iota
	// ClaimOwned: the latest revision carries this resource's identity.
	ClaimOwned
	// ClaimAdoptable: the release carries no owner identity (made by the helm
	// CLI or by an older version of this operator) but is of the watch's
	// chart, or it was left by a deleted resource of the same kind and name.
	ClaimAdoptable
	// ClaimConflict: the release belongs to another resource or is of another chart.
	ClaimConflict
)

// ClaimOf decides whose release st is, from its latest revision, for the
// resource identified by owner whose watch releases chartName. On conflict it
// also says, in words, whose the release is.
//
// The rules: a release whose latest revision carries owner's UID is owned.
// One carrying another identity of the same group and kind was left by an
// earlier resource of the same name, which no longer exists (names are unique
// per kind and namespace), so it is adoptable. One with no identity is
// adoptable when it is of the watch's chart. Anything else is a conflict.
func ClaimOf(st State, owner Owner, chartName string) (c Claim, whose string) {
	l := st.Latest
	if l == nil || l.Info == nil || l.Info.Status == release.StatusUninstalled {
		return ClaimFree, ""
	}
	uid, group, kind := l.Labels[LabelOwnerUID], l.Labels[LabelOwnerGroup], l.Labels[LabelOwnerKind]
	switch {
	case uid == string(owner.UID):
		return ClaimOwned, ""
	case uid != "" && group == owner.Group && kind == owner.Kind:
		return ClaimAdoptable, ""
	case uid != "":
		return ClaimConflict, fmt.Sprintf("Release %s belongs to %s %s/%s (%s)", l.Name, kind, l.Namespace, l.Name, group)
	}
	got := chartName
	if l.Chart != nil && l.Chart.Metadata != nil {
		got = l.Chart.Metadata.Name
	}
	if got == chartName {
		return ClaimAdoptable, ""
	}
	return ClaimConflict, fmt.Sprintf("Release %s was not made by this operator and is of chart %s, not %s", l.Name, got, chartName)
}

// Adopt records owner's identity on the latest revision of st, in Helm's
// storage, without writing a new revision or touching any object: from then
// on the release is the resource's own, and deleting the resource uninstalls it.
func (r *Runner) Adopt(st State) error {
	l := st.Latest
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	for k, v := range r.Owner.labels() {
		l.Labels[k] = v
	}
	if err := r.Client.Config().Releases.Update(l); err != nil {
		return &Error{Reason: status.ReasonReconcileError,
			Summary: fmt.Sprintf("Adopting release %s revision %d (recording its owner in Helm's storage) failed", r.Name, l.Version), Err: err}
	}
	return nil
}

// ValidateName checks that name can be a Helm release name (at most 53
// characters, a DNS subdomain). A resource whose name cannot be is stalled
// with InvalidReleaseName: no retry can help, the resource must be recreated.
func ValidateName(name string) error {
	if chartutil.ValidateReleaseName(name) == nil {
		return nil
	}
	why := "it is not a valid DNS subdomain name"
	if len(name) > 53 {
		why = fmt.Sprintf("Helm limits release names to 53 characters and this one has %d", len(name))
	}
	return &Error{Reason: status.ReasonInvalidReleaseName, StalledReason: status.ReasonInvalidReleaseName,
		Summary: fmt.Sprintf("The name %s cannot be a Helm release name: %s; recreate the resource with a shorter name", name, why)}
}

// Claim decides whose release st is (see ClaimOf) and, when it is the
// resource's to adopt, adopts it. adopted reports an adoption, for the
// event that says so. On conflict it returns the ReleaseNameConflict error.
func (r *Runner) Claim(st State) (adopted bool, err error) {
	c, whose := ClaimOf(st, r.Owner, r.Chart.Metadata.Name)
	switch c {
	case ClaimConflict:
		return false, &Error{Reason: status.ReasonReleaseNameConflict, StalledReason: status.ReasonReleaseNameConflict,
			Summary: whose + fmt.Sprintf("; nothing was changed. Give this resource another name, or remove that release (helm uninstall %s -n %s)", r.Name, r.Namespace)}
	case ClaimAdoptable:
		return true, r.Adopt(st)
	}
	return false, nil
}

// NotOurs tells, before an uninstall, why the release of the resource's name
// must not be uninstalled on its deletion: its name cannot be a release name,
// so no release was ever made, or the release belongs to someone else. It is
// empty when the release is the resource's own (or adoptable, which a
// resource's first reconcile does) or does not exist.
func (r *Runner) NotOurs() (string, error) {
	why, _, err := r.notOurs()
	return why, err
}

// notOurs is NotOurs, with the history it read.
func (r *Runner) notOurs() (string, State, error) {
	if ValidateName(r.Name) != nil {
		return fmt.Sprintf("The name %s cannot be a Helm release name, so no release was made", r.Name), State{}, nil
	}
	st, err := Observe(r.Client, r.Name)
	if err != nil {
		return "", st, err
	}
	if c, whose := ClaimOf(st, r.Owner, r.Chart.Metadata.Name); c == ClaimConflict {
		return whose + "; it was left in place", st, nil
	}
	return "", st, nil
}
