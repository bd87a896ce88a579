package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/release"
)

// Helm's hook failures, as install.go and upgrade.go of helm.sh/helm/v3
// phrase them ("failed pre-install: ...", "pre-upgrade hooks failed: ...").
var hookEvents = []struct {
	prefix string
	event  release.HookEvent
}{
	{"failed pre-install", release.HookPreInstall},
	{"failed post-install", release.HookPostInstall},
	{"pre-upgrade hooks failed", release.HookPreUpgrade},
	{"post-upgrade hooks failed", release.HookPostUpgrade},
	{"pre-rollback hooks failed", release.HookPreRollback},
	{"post-rollback hooks failed", release.HookPostRollback},
}

// nameHook re-phrases the error of a failed action so that it names the
// hook that held it. Helm says only "failed pre-install: 1 error occurred:
// timed out waiting for the condition" (over three lines), or, when the
// action was cancelled, "context canceled"; the revision it stored for the
// attempt (rel) records which hook ran and how it ended. helmAction is the
// Helm action that ran ("install", "upgrade"), which tells a hook's event
// among its events. err is returned as it is when no hook is to blame.
func nameHook(err error, rel *release.Release, helmAction string, timeout time.Duration) error {
	if err == nil || rel == nil {
		return err
	}
	msg := err.Error()
	event := release.HookEvent("")
	for _, h := range hookEvents {
		if strings.HasPrefix(msg, h.prefix) {
			event = h.event
		}
	}
	stopped := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if event == "" && !stopped {
		return err // not a hook's failure
	}
	h := unfinishedHook(rel)
	if h == nil {
		return err
	}
	if event == "" {
		event = eventOf(h, helmAction)
	}
	what := fmt.Sprintf("hook %s (%s %s)", h.Name, event, h.Kind)
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s had not completed when the action was cancelled (the operator was stopping): %w", what, err)
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "timed out waiting for the condition"):
		return fmt.Errorf("%s did not complete within %s", what, timeout)
	default:
		return fmt.Errorf("%s failed: %s", what, oneLine(strings.TrimPrefix(strings.TrimPrefix(msg, hookPrefix(msg)), ": ")))
	}
}

// unfinishedHook is the hook of rel that started last and did not succeed.
func unfinishedHook(rel *release.Release) *release.Hook {
	var last *release.Hook
	for _, h := range rel.Hooks {
		if h == nil || h.LastRun.StartedAt.IsZero() || h.LastRun.Phase == release.HookPhaseSucceeded {
			continue
		}
		if last == nil || h.LastRun.StartedAt.After(last.LastRun.StartedAt) {
			last = h
		}
	}
	return last
}

// eventOf is the hook's event for helmAction (pre-install for an install
// of a pre-install,pre-upgrade hook), else its events joined.
func eventOf(h *release.Hook, helmAction string) release.HookEvent {
	var all, of []string
	for _, e := range h.Events {
		all = append(all, string(e))
		if strings.HasSuffix(string(e), "-"+helmAction) {
			of = append(of, string(e))
		}
	}
	if len(of) == 1 {
		return release.HookEvent(of[0])
	}
	return release.HookEvent(strings.Join(all, ","))
}

func hookPrefix(msg string) string {
	for _, h := range hookEvents {
		if strings.HasPrefix(msg, h.prefix) {
			return h.prefix
		}
	}
	return ""
}

// oneLine folds Helm's multi-line error lists ("1 error occurred:\n\t* ...")
// into one line.
func oneLine(s string) string {
	var parts []string
	for _, p := range strings.Split(s, "\n\t* ") {
		if p = strings.Join(strings.Fields(p), " "); p != "" && !strings.HasSuffix(p, "errors occurred:") && !strings.HasSuffix(p, "error occurred:") {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "; ")
}
