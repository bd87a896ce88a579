//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// byHand is the description the suite's helm CLI writes give their
// revisions (helm upgrade --description), so that the oracle tells them
// from the operator's.
const byHand = "by hand"

// rollbackDescription is Helm's own description of a rollback's revision:
// the operator's remediation and a rollback by hand both leave it (Helm's
// rollback takes no description); status.history says which was which.
var rollbackDescription = regexp.MustCompile(`^Rollback to \d+$`)

// failedDescription is Helm's own description of a failed attempt ("Release
// "web" failed: …", "Upgrade "web" failed: …"), written over the cause. It
// stays when a later upgrade supersedes the failed revision.
var failedDescription = regexp.MustCompile(`^(Release|Upgrade|Rollback) "[^"]+" failed: `)

// causeViolations checks that every revision of the release has a cause
// (issue 42): Helm's description of a revision the operator made names its
// causes in one line from the fixed list (status.CauseTypes), or is Helm's
// own for what Helm allows no description of (a rollback, a failed
// attempt's failure, an uninstall), or the unlock's of an attempt that
// never finished; the suite's revisions by hand say so.
// A revision described as Helm describes an action given no description
// ("Install complete", "Upgrade complete") was made without a cause. And
// every entry of status.history has at least one cause of the list.
func causeViolations(u *unstructured.Unstructured, records []*helmrelease.Release) []string {
	var bad []string
	for _, rec := range records {
		if rec.Info == nil || rec.Info.Status.IsPending() {
			continue
		}
		d := rec.Info.Description
		switch {
		case d == byHand, rollbackDescription.MatchString(d):
		case strings.HasPrefix(d, "Unlocked by helm-app-operator: "):
			// An attempt that never finished (its process died): Helm
			// had stored only its placeholder ("Preparing upgrade"), the
			// cause comes with a finished revision; the unlock says why
			// it is failed (unlock.go).
		case rec.Info.Status == helmrelease.StatusFailed, rec.Info.Status == helmrelease.StatusUninstalled, failedDescription.MatchString(d):
			// Helm wrote its failure or the uninstall over the description;
			// a failed revision superseded since keeps Helm's failure.
		case !isCauseLine(d):
			bad = append(bad, fmt.Sprintf("causes: revision %d (%s) is described %q, which names no cause", rec.Version, rec.Info.Status, d))
		}
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		var e status.HistoryEntry
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &e); err != nil {
			bad = append(bad, fmt.Sprintf("causes: status.history entry %v: %v", m, err))
			continue
		}
		if len(e.Causes) == 0 {
			bad = append(bad, fmt.Sprintf("causes: status.history's revision %d (%s) has no cause", e.Revision, e.Action))
		}
		for _, c := range e.Causes {
			if !slices.Contains(status.CauseTypes, c.Type) {
				bad = append(bad, fmt.Sprintf("causes: status.history's revision %d has a cause %q not in the list", e.Revision, c.Type))
			}
		}
	}
	return bad
}

// isCauseLine tells whether d is status.CauseLine of causes: each part
// begins with a type of the list.
func isCauseLine(d string) bool {
	if d == "" {
		return false
	}
	for _, part := range strings.Split(d, "; ") {
		typ, _, _ := strings.Cut(part, ":")
		if !slices.Contains(status.CauseTypes, strings.TrimSpace(typ)) {
			return false
		}
	}
	return true
}

// A failed attempt that a later upgrade superseded keeps Helm's failure as
// its description: the oracle takes it for what Helm allows no cause of, as
// it does while the revision is failed (the CI run of stop 46: a resource
// created again at once under its predecessor's name failed its install
// until the garbage collector took the predecessor's objects, then
// upgraded over it). A revision described as Helm describes an action given
// no description is still caught.
func TestCauseCheckTakesASupersededFailure(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	rec := func(v int, st helmrelease.Status, d string) *helmrelease.Release {
		return &helmrelease.Release{Version: v, Info: &helmrelease.Info{Status: st, Description: d}}
	}
	ok := []*helmrelease.Release{
		rec(1, helmrelease.StatusSuperseded, `Release "web" failed: cannot patch "web" with kind ConfigMap: invalid`),
		rec(2, helmrelease.StatusSuperseded, `Upgrade "web" failed: timed out waiting for the condition`),
		rec(3, helmrelease.StatusDeployed, "SpecChanged: generation 1→2, values keys page"),
	}
	if bad := causeViolations(u, ok); len(bad) != 0 {
		t.Errorf("superseded failures taken for revisions without a cause: %v", bad)
	}
	bad := causeViolations(u, []*helmrelease.Release{rec(1, helmrelease.StatusSuperseded, "Install complete"), rec(2, helmrelease.StatusDeployed, "Upgrade complete")})
	if len(bad) != 2 {
		t.Errorf("revisions described as Helm describes an action given no description: %v, want both caught", bad)
	}
}
