package release

import (
	"fmt"
	"io"
	"strings"
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
// failed, a one-line message naming it and Helm's error. The hooks' pod
// logs are never read. A revision without test hooks is a run of none that
// succeeds.
//
// helm-operator-plugins' action client has no test action, so it runs
// Helm's on the client's configuration, as rollback does.
func (r *Runner) Test(timeout time.Duration) (status.TestRun, string) {
	run := status.TestRun{StartedAt: metav1.NewTime(r.now().Truncate(time.Second))}
	cfg := r.Client.Config()
	if cfg == nil {
		return completed(run, r.now()), fmt.Sprintf("Testing release %s failed: the Helm client has no action configuration", r.Name)
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
	rel, err := t.Run(r.Name)
	run = completed(run, r.now())
	if rel != nil {
		run.Revision = rel.Version
		run.Hooks = testHooks(rel)
	}
	if err == nil {
		return run, ""
	}
	return run, testFailure(r.Name, run, err)
}

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

func isTestHook(h *release.Hook) bool {
	for _, e := range h.Events {
		if e == release.HookTest {
			return true
		}
	}
	return false
}

// testFailure says which hook failed and why, on one line.
func testFailure(name string, run status.TestRun, err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	for _, h := range run.Hooks {
		if h.Phase == release.HookPhaseFailed.String() {
			return fmt.Sprintf("Test hook %s of release %s revision %d failed: %s", h.Name, name, run.Revision, msg)
		}
	}
	return fmt.Sprintf("Testing release %s revision %d failed: %s", name, run.Revision, msg)
}

func completed(run status.TestRun, now time.Time) status.TestRun {
	t := metav1.NewTime(now.Truncate(time.Second))
	run.CompletedAt = &t
	return run
}
