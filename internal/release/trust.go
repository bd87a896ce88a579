package release

import (
	"fmt"

	"helm.sh/helm/v3/pkg/release"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Records are trusted only as far as they deserve (issue 38). Helm's
// records are Secrets in the release namespace, which a tenant with the
// `edit` role may rewrite — labels included — and Helm acts on what a record
// lists: an upgrade deletes what the deployed record lists that the new
// revision lacks, an uninstall what the latest lists, a re-apply reads and
// restores it. What the tenant cannot write is the resource's status (the
// status subresource), where the operator records the digest of the
// deployed revision's manifest (status.deployedRelease.manifestDigest), and
// the operator's memory of the revisions it wrote (Actions).
//
// So a revision the operator vouches for — the one its status names as
// deployed, or the newest this process wrote — must still hold the manifest
// it had: a record of that revision whose manifest digest is another was
// rewritten in place, and is not acted on (ReleaseRecordInvalid). Revisions
// the operator does not vouch for (a new revision the helm CLI or another
// process wrote, a release to adopt, a status an older operator wrote
// without the digest, the superseded revisions a rollback returns to) keep
// the rules of foreign revisions and adoption; what guards the cluster
// from them is the release's scope and the re-apply's ownership rule
// (reapply.go). docs/tenancy.md says what this does and does not cover.

// CheckRecords returns a ReleaseRecordInvalid *Error, stalled, when the
// deployed or the latest revision of st is one the operator vouches for
// (vouched) and its record's manifest is not the one the operator knows:
// nothing the record lists may be read, applied or deleted. It makes no
// request. It returns nil when every revision it vouches for matches, or
// when it vouches for none of them.
func (r *Runner) CheckRecords(st State) error {
	revs := []*release.Release{st.Deployed}
	if l := st.Latest; l != nil && (st.Deployed == nil || l.Version != st.Deployed.Version) {
		revs = append(revs, l)
	}
	for _, rel := range revs {
		if rel == nil {
			continue
		}
		if want, ok := r.vouched(rel.Version); ok && Digest(rel.Manifest) != want {
			return r.recordInvalid(rel.Version)
		}
	}
	return nil
}

// Trusted tells whether rel is a revision the operator vouches for whose
// record still holds the manifest it knows: a re-apply re-creates the
// objects of such a revision that are missing, and only of such a one.
func (r *Runner) Trusted(rel *release.Release) bool {
	if rel == nil {
		return false
	}
	want, ok := r.vouched(rel.Version)
	return ok && Digest(rel.Manifest) == want
}

// vouched is the digest of the manifest of revision the operator knows,
// ok=false when it vouches for no manifest of that revision: the newest
// revision this process wrote for the resource (read back after its
// action, so fresher than a status the cache may still show), else the
// deployed revision the resource's status names, when the status records
// its digest.
func (r *Runner) vouched(revision int) (digest string, ok bool) {
	if rev, d := r.Actions.wroteDigest(r.Namespace, r.Name, r.Owner.UID); rev == revision && d != "" {
		return d, true
	}
	if v := r.Recorded; v != nil && v.Revision == revision && v.ManifestDigest != "" {
		return v.ManifestDigest, true
	}
	return "", false
}

// recordInvalid is the failure of a record of revision that was rewritten
// in place: stalled until the record is restored or deleted, which the
// watch of Helm's records sees.
func (r *Runner) recordInvalid(revision int) *Error {
	key := fmt.Sprintf("sh.helm.release.v1.%s.v%d", r.Name, revision)
	return &Error{Reason: status.ReasonReleaseRecordInvalid, StalledReason: status.ReasonReleaseRecordInvalid, Refused: true,
		Summary: fmt.Sprintf("Helm's record of release %s revision %d (Secret %s/%s) does not match what the operator wrote: its manifest was changed in place, so nothing it lists is read, applied or deleted. "+
			"Restore the record, or delete it (kubectl delete secret -n %s %s): the operator then goes on from this resource",
			r.Name, revision, r.Namespace, key, r.Namespace, key)}
}
