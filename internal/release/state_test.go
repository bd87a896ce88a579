package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
)

func rev(v int, st release.Status, written time.Time) *release.Release {
	return &release.Release{Name: "web", Version: v, Config: map[string]any{},
		Labels: map[string]string{LabelChartDigest: "c"},
		Info:   &release.Info{Status: st, LastDeployed: helmtime.Time{Time: written}}}
}

func TestDecide(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	want := Desired{ValuesDigest: ValuesDigest(map[string]any{}), ChartDigest: "c"}
	policy := LockPolicy{Now: start.Add(time.Minute), Since: start, Timeout: 5 * time.Minute}
	deployed := rev(1, release.StatusDeployed, start.Add(-time.Hour))
	tests := []struct {
		name   string
		latest *release.Release
		dep    *release.Release
		policy func(*LockPolicy)
		want   Plan
	}{
		{"nothing", nil, nil, nil, PlanInstall},
		{"uninstalled", rev(1, release.StatusUninstalled, start), nil, nil, PlanInstall},
		{"deployed as asked", deployed, deployed, nil, PlanReapply},
		{"failed install", rev(1, release.StatusFailed, start), nil, nil, PlanRetryInstall},
		{"failed upgrade", rev(2, release.StatusFailed, start), deployed, nil, PlanUpgrade},
		{"pending install written before this process", rev(1, release.StatusPendingInstall, start.Add(-time.Second)), nil, nil, PlanUnlock},
		{"pending upgrade written before this process", rev(2, release.StatusPendingUpgrade, start.Add(-time.Second)), deployed, nil, PlanUnlock},
		{"pending rollback older than the timeout", rev(3, release.StatusPendingRollback, start.Add(time.Second)), deployed,
			func(p *LockPolicy) { p.Now = start.Add(5*time.Minute + time.Second) }, PlanUnlock},
		{"pending install written by this process, young", rev(1, release.StatusPendingInstall, start.Add(time.Second)), nil, nil, PlanLocked},
		{"pending upgrade run by this process", rev(2, release.StatusPendingUpgrade, start.Add(-time.Hour)), deployed,
			func(p *LockPolicy) { p.RunningHere = "upgrade" }, PlanLocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy
			if tt.policy != nil {
				tt.policy(&p)
			}
			st := State{Latest: tt.latest, Deployed: tt.dep, Lock: JudgeLock(tt.latest, p)}
			if got := Decide(st, want); got != tt.want {
				t.Errorf("Decide = %s, want %s (lock %+v)", got, tt.want, st.Lock)
			}
		})
	}
	changed := Desired{ValuesDigest: "other", ChartDigest: "c"}
	if got := Decide(State{Latest: deployed, Deployed: deployed}, changed); got != PlanUpgrade {
		t.Errorf("changed values: Decide = %s, want Upgrade", got)
	}
}

func TestJudgeLockSaysWhyAndWhen(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	written := start.Add(10 * time.Second)
	l := JudgeLock(rev(1, release.StatusPendingInstall, written),
		LockPolicy{Now: start.Add(40 * time.Second), Since: start, Timeout: time.Minute})
	if l.Stale || l.Age != 30*time.Second || !l.UnlockAt.Equal(written.Add(time.Minute)) {
		t.Errorf("young lock: %+v", l)
	}
	l = JudgeLock(rev(1, release.StatusPendingInstall, start.Add(-time.Second)),
		LockPolicy{Now: start, Since: start, Timeout: time.Minute})
	if !l.Stale || !strings.Contains(l.Why, "written before this operator began reconciling at 2026-12-01T10:00:00Z") {
		t.Errorf("lock of an earlier process: %+v", l)
	}
	// This process's own action wrote it and ended without recording the
	// outcome: nobody runs it, whatever its age.
	l = JudgeLock(rev(2, release.StatusPendingUpgrade, written),
		LockPolicy{Now: start.Add(40 * time.Second), Since: start, Timeout: time.Minute, EndedHere: written.Add(time.Second)})
	if !l.Stale || !strings.Contains(l.Why, "ended without recording its outcome") {
		t.Errorf("lock of an ended action of this process: %+v", l)
	}
	// One written after this process's last action ended is someone else's.
	l = JudgeLock(rev(2, release.StatusPendingUpgrade, written),
		LockPolicy{Now: start.Add(40 * time.Second), Since: start, Timeout: time.Minute, EndedHere: written.Add(-time.Second)})
	if l.Stale {
		t.Errorf("a lock written after this process's last action ended is stale: %+v", l)
	}
	if JudgeLock(rev(1, release.StatusFailed, start), LockPolicy{}) != nil {
		t.Errorf("a failed revision is no lock")
	}
}

func TestNameHook(t *testing.T) {
	started := helmtime.Time{Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	rel := &release.Release{Hooks: []*release.Hook{
		{Name: "done", Kind: "ConfigMap", Events: []release.HookEvent{release.HookPreInstall},
			LastRun: release.HookExecution{StartedAt: started, Phase: release.HookPhaseSucceeded}},
		{Name: "web-wait", Kind: "Job", Events: []release.HookEvent{release.HookPreInstall, release.HookPreUpgrade},
			LastRun: release.HookExecution{StartedAt: started, Phase: release.HookPhaseFailed}},
	}}
	timedOut := errors.New("failed pre-install: 1 error occurred:\n\t* timed out waiting for the condition\n\n")
	if got := nameHook(timedOut, rel, "install", 5*time.Minute).Error(); got != "hook web-wait (pre-install Job) did not complete within 5m0s" {
		t.Errorf("timeout: %q", got)
	}
	upgradeFailed := errors.New("pre-upgrade hooks failed: 1 error occurred:\n\t* job web-wait failed: BackoffLimitExceeded\n\n")
	if got := nameHook(upgradeFailed, rel, "upgrade", time.Minute).Error(); got != "hook web-wait (pre-upgrade Job) failed: job web-wait failed: BackoffLimitExceeded" {
		t.Errorf("failure: %q", got)
	}
	rel.Hooks[1].LastRun.Phase = release.HookPhaseUnknown
	cancelled := fmt.Errorf("install: %w", context.Canceled)
	if got := nameHook(cancelled, rel, "upgrade", time.Minute); !errors.Is(got, context.Canceled) ||
		!strings.HasPrefix(got.Error(), "hook web-wait (pre-upgrade Job) had not completed when the action was cancelled") {
		t.Errorf("cancelled: %q", got)
	}
	other := errors.New(`cannot patch "web" with kind Deployment: denied`)
	if got := nameHook(other, rel, "install", time.Minute); got != other {
		t.Errorf("a failure that is not a hook's is kept: %q", got)
	}
}

func TestGraceContextOutlivesItsParent(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := GraceContext(parent, time.Hour)
	defer cancel()
	stop()
	select {
	case <-ctx.Done():
		t.Fatal("the action's context ended with its parent, before the grace period")
	case <-time.After(100 * time.Millisecond):
	}
	short, cancelShort := GraceContext(parent, 10*time.Millisecond)
	defer cancelShort()
	select {
	case <-short.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the action's context was not cancelled after the grace period")
	}
}

func TestDecideDelete(t *testing.T) {
	tests := []struct {
		name  string
		facts DeleteFacts
		want  DeletePlan
	}{
		{"ours, to uninstall", DeleteFacts{}, DeleteUninstall},
		{"kept", DeleteFacts{Keep: true}, DeleteKeep},
		{"not ours, even when kept", DeleteFacts{NotOurs: "owned by another resource", Keep: true}, DeleteNotOurs},
		{"the actor gone with its namespace", DeleteFacts{ActorGone: true}, DeleteSkip},
		{"kept, the actor gone", DeleteFacts{Keep: true, ActorGone: true}, DeleteKeep},
		{"already uninstalled", DeleteFacts{Gone: true}, DeleteGone},
		{"the actor gone, already uninstalled", DeleteFacts{ActorGone: true, Gone: true}, DeleteSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecideDelete(tt.facts); got != tt.want {
				t.Errorf("DecideDelete(%+v) = %s, want %s", tt.facts, got, tt.want)
			}
		})
	}
}
