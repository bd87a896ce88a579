package release

import (
	"context"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// TestPolicy is a watch's test field: whether and how the chart's test
// hooks run after each successful install or upgrade.
type TestPolicy struct {
	Enable bool
	// Timeout bounds each test hook; 0 means the runner's Timeout.
	Timeout        time.Duration
	IgnoreFailures bool
}

// Test runs the test hooks of the release's latest revision (helm test),
// each bounded by timeout (0: the runner's Timeout), and returns what ran:
// the revision, each test hook's name, phase and times, and, when a hook
// failed, a one-line message naming it, Helm's error and why its pod
// failed (the pod's reason, its containers' terminated or waiting reasons
// and exit codes, read from the pod's status; see podFailure). The hooks'
// pod logs are never read, nor a container's termination message (which
// may be the tail of its log). A revision without test hooks is a run of
// none that succeeds.
//
// The run is an action of the registry (ActionTest): it counts in the
// actions' metrics, and a newer generation of the resource preempts it
// while it waits on a test hook; superseded then says so, and the message
// says which generation runs next.
//
// helm-operator-plugins' action client has no test action, so it runs
// Helm's on the client's configuration, as rollback does.
func (r *Runner) Test(ctx context.Context, timeout time.Duration) (run status.TestRun, failure string, superseded *Superseded) {
	run = status.TestRun{StartedAt: metav1.NewTime(r.now().Truncate(time.Second))}
	cfg := r.Client.Config()
	if cfg == nil {
		return completed(run, r.now()), fmt.Sprintf("Testing release %s failed: the Helm client has no action configuration", r.Name), nil
	}
	if timeout <= 0 {
		timeout = r.timeout()
	}
	if cfg.HookOutputFunc == nil {
		// A hook's helm.sh/hook-output-log-policy copies its pods' logs to
		// this writer: they go nowhere.
		cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	}
	t := action.NewReleaseTesting(cfg)
	t.Namespace = r.Namespace
	t.Timeout = timeout

	var ra *runningAction
	if r.Actions != nil {
		ra = r.Actions.beginTest(r.Namespace, r.Name, r.Owner.UID, r.Generation)
		defer r.Actions.end(r.Namespace, r.Name, ra)
	}
	start := time.Now()
	rel, err := t.Run(r.Name)
	r.Actions.observed(r.Owner.Kind, ActionTest, start, err)
	run = completed(run, r.now())
	if rel != nil {
		run.Revision = rel.Version
		run.Hooks = testHooks(rel)
	}
	if err == nil {
		return run, "", nil
	}
	if s := r.Actions.preemptedBy(ra); s != nil {
		what := "a test hook"
		if h := failedTestHook(rel); h != nil {
			what = fmt.Sprintf("test hook %s (%s)", h.Name, h.Kind)
		}
		return run, fmt.Sprintf("The test run of release %s revision %d for generation %d was superseded by generation %d while it waited on %s; generation %d runs next",
			r.Name, run.Revision, s.From, s.To, what, s.To), s
	}
	return run, r.testFailure(ctx, rel, run, err), nil
}

// ActionTest is the registry's and the metrics' name of a test run.
const ActionTest = "test"

// testHooks are the test hooks of rel with their last run, in Helm's order.
func testHooks(rel *release.Release) []status.TestHook {
	var out []status.TestHook
	for _, h := range rel.Hooks {
		if !isTestHook(h) {
			continue
		}
		th := status.TestHook{Name: h.Name, Phase: h.LastRun.Phase.String()}
		if th.Phase == "" {
			th.Phase = "NotRun"
		}
		if !h.LastRun.StartedAt.IsZero() {
			t := metav1.NewTime(h.LastRun.StartedAt.Time.Truncate(time.Second))
			th.StartedAt = &t
		}
		if !h.LastRun.CompletedAt.IsZero() {
			t := metav1.NewTime(h.LastRun.CompletedAt.Time.Truncate(time.Second))
			th.CompletedAt = &t
		}
		out = append(out, th)
	}
	return out
}

// failedTestHook is the test hook of rel whose last run failed (Helm stops
// at the first), nil for none.
func failedTestHook(rel *release.Release) *release.Hook {
	if rel == nil {
		return nil
	}
	for _, h := range rel.Hooks {
		if h != nil && isTestHook(h) && h.LastRun.Phase == release.HookPhaseFailed {
			return h
		}
	}
	return nil
}

func isTestHook(h *release.Hook) bool {
	for _, e := range h.Events {
		if e == release.HookTest {
			return true
		}
	}
	return false
}

// testFailure says which hook failed and why, on one line; Helm's error
// and what the pod says are marked status.Foreign (they may quote values).
func (r *Runner) testFailure(ctx context.Context, rel *release.Release, run status.TestRun, err error) string {
	msg := status.Foreign(oneLine(err.Error()))
	if h := failedTestHook(rel); h != nil {
		if why := r.podFailure(ctx, h); why != "" {
			msg += " (" + status.Foreign(why) + ")"
		}
		return fmt.Sprintf("Test hook %s of release %s revision %d failed: %s", h.Name, r.Name, run.Revision, msg)
	}
	return fmt.Sprintf("Testing release %s revision %d failed: %s", r.Name, run.Revision, msg)
}

func completed(run status.TestRun, now time.Time) status.TestRun {
	t := metav1.NewTime(now.Truncate(time.Second))
	run.CompletedAt = &t
	return run
}
