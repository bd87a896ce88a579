//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// defaultScenarioPoints is how many crash points the rollout and chunked
// scenarios run by default, spread over their writes (E2E_CRASH_POINTS=all
// runs every one).
const defaultScenarioPoints = 4

// rolloutHooked are the Hooked resources of the rollout scenario: with the
// default rollout (maxUnavailable 25% of 3, rounded up: 1) a new chart
// reaches them one at a time.
var rolloutHooked = []string{"r1", "r2", "r3"}

// neighbourStep creates the Echo nb, which no later step targets: the
// oracle checks that none changes its objects or Helm records.
func neighbourStep() crashStep {
	return crashStep{what: "create the neighbour Echo nb", do: func(e *env) {
		e.apply("echo-nb", "apiVersion: web.helmapp.io/v1alpha1\nkind: Echo\nmetadata:\n  name: nb\nspec:\n  message: neighbour\n")
		e.t.Cleanup(func() {
			// Before the operator stops (newEnv's cleanups run after this one).
			if _, err := e.tryKubectl("delete", "echo", "--all", "--timeout=90s"); err != nil {
				e.t.Errorf("deleting the neighbour: %v", err)
			}
		})
	}, done: func(ctx context.Context, e *env) (bool, string) {
		u, err := suite.dyn.Resource(watchedKinds[1].gvr).Namespace(e.ns).Get(ctx, "nb", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		return n.is(typeReady, metav1.ConditionTrue), n.String()
	}, targets: []string{"nb"}}
}

// rolloutScenario installs three Hooked of a copy of the chart hookjob (a
// pre-install/pre-upgrade hook Job that kwok completes) and the neighbour
// Echo nb; then the chart's version changes and the operator is restarted
// on it (a new operator version shipping a new chart), armed with the
// crash point: it upgrades the three one at a time (the default rollout),
// the rest waiting with ChartUpgradePending=True AwaitingRollout. Only the
// rollout's writes are crash points.
func rolloutScenario(t *testing.T) crashScenario {
	chart := filepath.Join(t.TempDir(), "hookjob")
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(suite.root, "test", "e2e", "testdata", "charts", "hookjob"))); err != nil {
		t.Fatal(err)
	}
	onChart := func(version string) func(ctx context.Context, e *env) (bool, string) {
		return func(ctx context.Context, e *env) (bool, string) {
			var seen []string
			ok := true
			for _, name := range rolloutHooked {
				u, err := suite.dyn.Resource(hookedGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				n := &nginx{}
				if err := fromUnstructured(u, n); err != nil {
					return false, err.Error()
				}
				v, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "chartVersion")
				ok = ok && v == version && n.is(typeReady, metav1.ConditionTrue) && n.cond("ChartUpgradePending") == nil
				seen = append(seen, fmt.Sprintf("%s on %s: %s", name, v, n))
			}
			return ok, strings.Join(seen, "; ")
		}
	}
	secrets := []string{specSecret}
	return crashScenario{
		watch: func(*testing.T) watchOptions { return watchOptions{hooked: true, hookedChart: chart} },
		steps: []crashStep{
			neighbourStep(),
			{what: "install r1, r2, r3 on chart 0.1.0", do: func(e *env) {
				for _, name := range rolloutHooked {
					e.applyHooked(name, "  data:\n    greeting: hello-"+name+"\n    token: "+specSecret+"\n")
				}
			}, done: onChart("0.1.0"), oracle: oracleOptions{secrets: secrets}, targets: rolloutHooked},
			{what: "chart 0.2.0: the operator restarted on it rolls it out", prepare: func(e *env) {
				p := filepath.Join(chart, "Chart.yaml")
				b, err := os.ReadFile(p)
				if err != nil {
					e.t.Fatal(err)
				}
				if !strings.Contains(string(b), "version: 0.1.0") {
					e.fatalf("%s: no version 0.1.0 to change:\n%s", p, b)
				}
				if err := os.WriteFile(p, []byte(strings.Replace(string(b), "version: 0.1.0", "version: 0.2.0", 1)), 0o644); err != nil {
					e.t.Fatal(err)
				}
			}, do: func(*env) {}, arm: true, done: onChart("0.2.0"), oracle: oracleOptions{secrets: secrets}, targets: rolloutHooked},
		},
		points: spreadPoints(defaultScenarioPoints),
	}
}

// chunkedScenario: with storage: chunked and a chart over 1 MiB (the hooked
// chart plus two 600 KiB random files: every revision several chunk
// Secrets), a Hooked is installed, upgraded and deleted beside the
// neighbour Echo nb; the operator is armed once nb is Ready, so that the
// chunked release's writes are the crash points. After each step the
// chunk Secrets are checked: each owned and listed by the index Secret of
// a revision the history keeps.
func chunkedScenario(t *testing.T) crashScenario {
	chart := bigHookedChart(t)
	secrets := []string{specSecret}
	chunksHeld := func(done func(ctx context.Context, e *env) (bool, string)) func(ctx context.Context, e *env) (bool, string) {
		return func(ctx context.Context, e *env) (bool, string) {
			ok, seen := done(ctx, e)
			if ok {
				e.chunks("h") // fails the test on a chunk left over or missing
			}
			return ok, seen
		}
	}
	return crashScenario{
		watch: func(*testing.T) watchOptions {
			return watchOptions{hooked: true, hookedChart: chart, hookedStorage: "chunked", timeout: "10m", hookedFinalizer: "always"} // see runCrashScenario
		},
		steps: []crashStep{
			neighbourStep(),
			{what: "install", arm: true, do: func(e *env) {
				e.applyHooked("h", "  block: false\n  data:\n    greeting: hello\n    token: "+specSecret+"\n")
			}, done: chunksHeld(hookedReady("h", 1)), oracle: oracleOptions{secrets: secrets}, targets: []string{"h"}},
			{what: "upgrade", do: func(e *env) {
				e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"data":{"greeting":"again"}}}`)
			}, done: chunksHeld(hookedReady("h", 2)), oracle: oracleOptions{secrets: secrets}, targets: []string{"h"}},
			{what: "uninstall", do: func(e *env) {
				e.kubectl("delete", "hooked", "h", "--wait=false")
			}, done: func(ctx context.Context, e *env) (bool, string) {
				_, err := e.getHooked(ctx, "h")
				if !apierrors.IsNotFound(err) {
					return false, fmt.Sprintf("hooked/h: %v", err)
				}
				left := e.recordSecrets("h")
				return len(left) == 0, fmt.Sprintf("release Secrets left: %v", left)
			}, oracle: oracleOptions{secrets: secrets, gone: []string{"h"}}, targets: []string{"h"}},
		},
		// A crash inside a chunked record's write once lost the release
		// (helm-operator-plugins' driver: docs/recovery.md, "Crash at
		// every write"); with our own driver every point holds
		// (E2E_CRASH_POINTS=all), and by default 4 run, spread evenly.
		points: spreadPoints(defaultScenarioPoints),
	}
}

// Crash at every write of a staged chart rollout (issue 28): three
// resources upgraded one at a time to a new chart by a restarted operator;
// the crash points are the rollout's writes. By default 4 of them run,
// spread evenly (E2E_CRASH_POINTS=all: every one).
func TestCrashAtEveryWriteRollout(t *testing.T) { crashAtEveryWrite(t, rolloutScenario) }

// Crash at every write of a chunked release (storage: chunked, a chart
// over 1 MiB): install, upgrade, uninstall. By default 4 crash points run,
// spread evenly (E2E_CRASH_POINTS=all: every one).
func TestCrashAtEveryWriteChunked(t *testing.T) { crashAtEveryWrite(t, chunkedScenario) }
