package release

import (
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// A revision the operator vouches for — the deployed one its status names
// with a manifest digest, or the newest this process wrote for the
// resource — must still hold that manifest; revisions it does not vouch
// for keep the rules of foreign revisions and adoption.
func TestCheckRecords(t *testing.T) {
	const manifest = "kind: ConfigMap\nmetadata:\n  name: web\n"
	forged := manifest + "---\nkind: ConfigMap\nmetadata:\n  name: precious\n  namespace: b\n"
	at := func(v int, st release.Status, m string) *release.Release {
		r := rev(v, st, time.Now())
		r.Manifest = m
		return r
	}
	recorded := func(v int, m string) *status.DeployedRelease {
		return &status.DeployedRelease{Revision: v, ManifestDigest: Digest(m)}
	}
	const uid, other types.UID = "uid-1", "uid-2"
	tests := []struct {
		name     string
		st       State
		recorded *status.DeployedRelease
		wrote    func(a *Actions)
		invalid  int // the revision named, 0 for none
	}{
		{name: "as the status records it", st: deployed(at(3, release.StatusDeployed, manifest)), recorded: recorded(3, manifest)},
		{name: "rewritten in place", st: deployed(at(3, release.StatusDeployed, forged)), recorded: recorded(3, manifest), invalid: 3},
		{name: "a status with no digest (an older operator): foreign rules", st: deployed(at(3, release.StatusDeployed, forged)),
			recorded: &status.DeployedRelease{Revision: 3}},
		{name: "a newer revision someone else wrote: foreign rules", st: deployed(at(4, release.StatusDeployed, forged)), recorded: recorded(3, manifest)},
		{name: "nothing recorded (adoption, install)", st: deployed(at(1, release.StatusDeployed, forged))},
		{name: "written here, the status not yet in the cache", st: deployed(at(4, release.StatusDeployed, manifest)), recorded: recorded(3, manifest),
			wrote: func(a *Actions) { a.noteWrote("ns", "web", uid, 4, Digest(manifest)) }},
		{name: "written here, then rewritten", st: deployed(at(4, release.StatusDeployed, forged)), recorded: recorded(3, manifest),
			wrote: func(a *Actions) { a.noteWrote("ns", "web", uid, 4, Digest(manifest)) }, invalid: 4},
		{name: "written here more recently than the status says (installed again at the same revision)",
			st: deployed(at(1, release.StatusDeployed, forged)), recorded: recorded(1, manifest),
			wrote: func(a *Actions) { a.noteWrote("ns", "web", uid, 1, Digest(forged)) }},
		{name: "written for a resource of the same name that was deleted", st: deployed(at(4, release.StatusDeployed, forged)),
			wrote: func(a *Actions) { a.noteWrote("ns", "web", other, 4, Digest(manifest)) }},
		{name: "a failed latest revision written here, rewritten",
			st:       State{Latest: at(4, release.StatusFailed, forged), Deployed: at(3, release.StatusDeployed, manifest)},
			recorded: recorded(3, manifest), wrote: func(a *Actions) { a.noteWrote("ns", "web", uid, 4, Digest(manifest)) }, invalid: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewActions()
			if tt.wrote != nil {
				tt.wrote(a)
			}
			r := &Runner{Shared: &Shared{Services: &Services{Actions: a}}, Name: "web", Namespace: "ns",
				Owner: Owner{UID: uid}, Recorded: tt.recorded}
			err := r.CheckRecords(tt.st)
			if tt.invalid == 0 {
				if err != nil {
					t.Fatalf("CheckRecords = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != status.ReasonReleaseRecordInvalid || e.StalledReason != status.ReasonReleaseRecordInvalid {
				t.Fatalf("CheckRecords = %v, want a stalled ReleaseRecordInvalid", err)
			}
			key := "ns/sh.helm.release.v1.web.v" + string(rune('0'+tt.invalid))
			if msg := e.Error(); !strings.Contains(msg, key) || strings.Contains(msg, "\n") {
				t.Errorf("message %q does not name %s on one line", msg, key)
			}
		})
	}
}

// Trusted: a re-apply re-creates missing objects only from a revision the
// operator vouches for whose record is intact.
func TestTrusted(t *testing.T) {
	r := &Runner{Shared: &Shared{Services: &Services{Actions: NewActions()}}, Name: "web", Namespace: "ns", Owner: Owner{UID: "u"},
		Recorded: &status.DeployedRelease{Revision: 2, ManifestDigest: Digest("m")}}
	mk := func(v int, m string) *release.Release { return &release.Release{Version: v, Manifest: m} }
	for _, tt := range []struct {
		rel  *release.Release
		want bool
	}{{mk(2, "m"), true}, {mk(2, "forged"), false}, {mk(3, "m"), false}, {nil, false}} {
		if got := r.Trusted(tt.rel); got != tt.want {
			t.Errorf("Trusted(%+v) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

// What the registry remembers of a release is the resource's: a resource
// deleted and created again under the same name inherits neither the
// revision its predecessor wrote nor when its last action ended, so that a
// later revision someone else writes, numbered at or below the old one, is
// still foreign.
func TestActionsRememberTheResource(t *testing.T) {
	a := NewActions()
	a.noteWrote("ns", "web", "old", 5, "d5")
	end := a.track("ns", "web", "old", status.ActionUninstall)
	end()
	if a.Wrote("ns", "web", "old") != 5 || a.EndedAt("ns", "web", "old").IsZero() {
		t.Fatalf("the registry forgot the resource's own writes: %v %v", a.wrote, a.ended)
	}
	// A new resource of the same name, its deletion unseen.
	if got := a.Wrote("ns", "web", "new"); got != 0 {
		t.Errorf("Wrote for the new resource = %d, want 0", got)
	}
	if got := a.EndedAt("ns", "web", "new"); !got.IsZero() {
		t.Errorf("EndedAt for the new resource = %v, want zero", got)
	}
	r := &Runner{Shared: &Shared{Services: &Services{Actions: a}}, Name: "web", Namespace: "ns", Owner: Owner{UID: "new"}, Known: 1}
	if k := r.known(); k != 1 {
		t.Errorf("known() = %d, want 1 (the new resource's status only)", k)
	}
	// The new resource writes revision 1: its own, lower than the old 5.
	a.noteWrote("ns", "web", "new", 1, "d1")
	if got := a.Wrote("ns", "web", "new"); got != 1 {
		t.Errorf("Wrote after the new resource's install = %d, want 1", got)
	}
	// The old resource's deletion, seen late, forgets nothing of the new one.
	a.Forget("ns", "web", "old")
	if got := a.Wrote("ns", "web", "new"); got != 1 {
		t.Errorf("Wrote after forgetting the old resource = %d, want 1", got)
	}
	a.Forget("ns", "web", "new")
	if len(a.wrote) != 0 || len(a.ended) != 0 || len(a.seen) != 0 {
		t.Errorf("Forget left %v %v %v", a.wrote, a.ended, a.seen)
	}
}

func deployed(r *release.Release) State { return State{Latest: r, Deployed: r} }
