//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorpkg "github.com/helmapp/helm-app-operator/internal/operator"
)

// crashStep is a user's action and what the user then waits for; the
// oracle checks the namespace once it is there.
type crashStep struct {
	what string
	do   func(e *env)
	// done reports whether the step's outcome is there, and what it saw.
	done   func(ctx context.Context, e *env) (bool, string)
	oracle oracleOptions
	// targets are the releases the step may change; the oracle checks
	// that the step left every other resource's objects and Helm records
	// as they were (neighbours_test.go).
	targets []string
	// arm, on a scenario's step: the steps before it run with an operator
	// without the crash point; before this step's do (after its prepare),
	// the operator is stopped (SIGTERM) and started again with the crash
	// point's variables (a new operator version, for a chart rollout), so
	// that only the writes from this step on are logged and are crash
	// points.
	arm     bool
	prepare func(e *env)
}

// crashScenario is a scenario's steps and the watch its operator runs.
type crashScenario struct {
	steps []crashStep
	// watch is the watch options; a Hooked on the chart hookjob when nil.
	watch func(t *testing.T) watchOptions
	// points picks the crash points run by default (E2E_CRASH_POINTS
	// unset) among the n recorded writes, ends[i] those logged at the end of
	// step i; every write when nil.
	points func(n int, ends []int) []int
}

// hookScenario installs a Hooked of the chart hookjob (a pre-install and
// pre-upgrade hook Job that completes), upgrades it, and deletes it (the
// operator uninstalls the release).
func hookScenario() []crashStep {
	secrets := []string{specSecret}
	return []crashStep{
		{what: "install", do: func(e *env) {
			e.applyHooked("h", "  data:\n    greeting: hello\n    token: "+specSecret+"\n")
		}, done: hookedReady("h", 1), oracle: oracleOptions{secrets: secrets}, targets: []string{"h"}},
		{what: "upgrade", do: func(e *env) {
			e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"data":{"greeting":"again"}}}`)
		}, done: hookedReady("h", 2), oracle: oracleOptions{secrets: secrets}, targets: []string{"h"}},
		{what: "uninstall", do: func(e *env) {
			e.kubectl("delete", "hooked", "h", "--wait=false")
		}, done: hookedGone("h"), oracle: oracleOptions{secrets: secrets, gone: []string{"h"}}, targets: []string{"h"}},
	}
}

// hookedReady is done once hooked/name is Ready at generation gen or later.
func hookedReady(name string, gen int64) func(ctx context.Context, e *env) (bool, string) {
	return func(ctx context.Context, e *env) (bool, string) {
		n, err := e.getHooked(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return n.Metadata.Generation >= gen && n.is(typeReady, metav1.ConditionTrue), n.String()
	}
}

// hookedGone is done once hooked/name is gone.
func hookedGone(name string) func(ctx context.Context, e *env) (bool, string) {
	return func(ctx context.Context, e *env) (bool, string) {
		_, err := e.getHooked(ctx, name)
		return apierrors.IsNotFound(err), fmt.Sprintf("hooked/%s: %v", name, err)
	}
}

// foreignScenario installs a Hooked of the chart hookjob, changes its
// release by hand with `helm upgrade --set` (the hook runs again), waits for
// the operator to upgrade it back to the spec, and deletes it.
func foreignScenario() []crashStep {
	steps := hookScenario()
	foreign := crashStep{what: "helm upgrade by hand", do: func(e *env) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		chart := filepath.Join(suite.root, "test", "e2e", "testdata", "charts", "hookjob")
		if out, err := suite.cp.Helm(ctx, "upgrade", "h", chart, "-n", e.ns, "--reuse-values", "--set", "data.greeting=by-hand", "--description", byHand); err != nil {
			e.fatalf("%v\n%s", err, out)
		}
	}, done: func(ctx context.Context, e *env) (bool, string) {
		recs, _, err := e.releaseRecords("h")
		if err != nil || len(recs) == 0 {
			return false, fmt.Sprintf("records: %v", err)
		}
		latest := recs[len(recs)-1]
		data, _ := latest.Config["data"].(map[string]any)
		n, err := e.getHooked(ctx, "h")
		if err != nil {
			return false, err.Error()
		}
		return latest.Version >= 3 && latest.Info.Status == "deployed" && data["greeting"] == "hello" && n.is(typeReady, metav1.ConditionTrue),
			fmt.Sprintf("latest revision %d %s, greeting %v; %s", latest.Version, latest.Info.Status, data["greeting"], n)
	}, oracle: steps[0].oracle, targets: []string{"h"}}
	return []crashStep{steps[0], foreign, steps[2]}
}

// Crash at every write (issue 28): the hook scenario runs once with the
// operator's writes recorded (the crash point's write log); then, for each
// write k, again in a new namespace with an operator that SIGKILLs itself
// right after write k. The test restarts it and carries on with the
// scenario; after each step the oracle checks the namespace.
// E2E_CRASH_POINTS (k, or a-b) runs only those crash points.
func TestCrashAtEveryWrite(t *testing.T) {
	crashAtEveryWrite(t, func(*testing.T) crashScenario { return crashScenario{steps: hookScenario()} })
}

// The same with a revision written by hand with the helm CLI between the
// install and the uninstall. Unless E2E_CRASH_POINTS says otherwise
// (E2E_CRASH_POINTS=all: every write), only the writes of the step that
// undoes the CLI's revision are crash points, to keep the suite's time: the
// install's and the uninstall's are TestCrashAtEveryWrite's.
func TestCrashAtEveryWriteForeign(t *testing.T) {
	crashAtEveryWrite(t, func(*testing.T) crashScenario {
		return crashScenario{steps: foreignScenario(), points: stepPoints(1)}
	})
}

// stepPoints picks the writes of step i.
func stepPoints(i int) func(n int, ends []int) []int {
	return func(n int, ends []int) []int {
		from := 1
		if i > 0 {
			from = ends[i-1] + 1
		}
		var out []int
		for k := from; k <= ends[i]; k++ {
			out = append(out, k)
		}
		return out
	}
}

// spreadPoints picks m writes spread evenly over the n, the last included.
func spreadPoints(m int) func(n int, ends []int) []int {
	return func(n int, _ []int) []int {
		var out []int
		for j := 1; j <= min(m, n); j++ {
			if k := j * n / min(m, n); len(out) == 0 || out[len(out)-1] != k {
				out = append(out, k)
			}
		}
		return out
	}
}

// crashAtEveryWrite records the scenario's writes, then kills the operator
// after each (after those the scenario picks, unless E2E_CRASH_POINTS
// says otherwise).
func crashAtEveryWrite(t *testing.T, scenario func(t *testing.T) crashScenario) {
	var writes []string
	var ends []int
	t.Run("record", func(t *testing.T) { writes, _, ends = runCrashScenario(t, "record", scenario(t), 0) })
	if len(writes) == 0 {
		t.Fatal("the recorded run logged no write")
	}
	t.Logf("the scenario's %d writes:\n  %s", len(writes), strings.Join(writes, "\n  "))
	from, to, err := crashPoints(os.Getenv("E2E_CRASH_POINTS"), len(writes))
	if err != nil {
		t.Fatal(err)
	}
	var points []int
	for k := from; k <= to; k++ {
		points = append(points, k)
	}
	if pick := scenario(t).points; pick != nil && os.Getenv("E2E_CRASH_POINTS") == "" {
		points = pick(len(writes), ends)
		t.Logf("crash points %v of the %d by default (E2E_CRASH_POINTS=all runs every one)", points, len(writes))
	}
	var mu sync.Mutex
	var killed, notReached []int
	start := time.Now()
	t.Run("points", func(t *testing.T) {
		for _, k := range points {
			t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
				t.Parallel()
				log, at, _ := runCrashScenario(t, "crash", scenario(t), k)
				mu.Lock()
				defer mu.Unlock()
				if at == "" {
					notReached = append(notReached, k)
					t.Logf("write %d was not reached: this run made %d writes", k, len(log))
					return
				}
				killed = append(killed, k)
				if want := writes[k-1]; fieldsAfterCount(want) != fieldsAfterCount(at) {
					t.Logf("note: the recorded run's write %d was %s", k, want)
				}
			})
		}
	})
	slices.Sort(killed)
	slices.Sort(notReached)
	t.Logf("%d crash points of %d in %.0fs: %d killed, restarted and checked by the oracle %v; %d not reached %v; failed: %v",
		len(points), len(writes), time.Since(start).Seconds(), len(killed), killed, len(notReached), notReached, t.Failed())
}

// crashPoints parses E2E_CRASH_POINTS: empty or all means 1-n.
func crashPoints(s string, n int) (from, to int, err error) {
	if s == "" || s == "all" {
		return 1, n, nil
	}
	a, b, found := strings.Cut(s, "-")
	if from, err = strconv.Atoi(a); err == nil {
		to = from
		if found {
			to, err = strconv.Atoi(b)
		}
	}
	if err != nil || from < 1 || to < from {
		return 0, 0, fmt.Errorf("E2E_CRASH_POINTS=%q: want k or a-b, 1 <= a <= b", s)
	}
	return from, min(to, n), nil
}

// fieldsAfterCount is a write log line without its number.
func fieldsAfterCount(line string) string {
	_, rest, _ := strings.Cut(line, " ")
	return rest
}

// runCrashScenario runs the scenario's steps in a new namespace with an
// operator that logs its writes and, when k > 0, kills itself after write k
// (from the scenario's armed step on, when it has one); it restarts a
// killed operator. While a step runs it checks that no revision is left
// pending that no live operator's action holds, and after each step the
// oracle, and that the step left the resources it does not target as they
// were. It returns the write log of the first armed operator, when it was
// killed its last line, and how many writes it had logged at the end of
// each step.
func runCrashScenario(t *testing.T, prefix string, sc crashScenario, k int) (writes []string, killedAt string, ends []int) {
	t.Helper()
	f, err := os.CreateTemp(suite.dir, "writes-*.log")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	env := []string{operatorpkg.WriteLogEnv + "=" + f.Name()}
	if k > 0 {
		env = append(env, operatorpkg.CrashAfterWriteEnv+"="+strconv.Itoa(k))
	}
	// finalizer: always: the hookjob chart's releases need no finalizer
	// (issue 41), and their deletion would be the garbage collector's, with
	// no write of the operator's to crash after; the uninstall path's writes
	// stay crash points.
	w := watchOptions{hooked: true, hookedChart: "hookjob", hookedFinalizer: "always"}
	if sc.watch != nil {
		w = sc.watch(t)
	}
	armed := !slices.ContainsFunc(sc.steps, func(s crashStep) bool { return s.arm })
	if armed {
		w.operatorEnv = env
	}
	e := newEnv(t, "e2e-"+prefix, w)
	pending := newPendingWatch()
	for _, s := range sc.steps {
		before := e.neighbourSnapshot(s.targets)
		if s.prepare != nil {
			s.prepare(e)
		}
		if s.arm {
			if err := e.op.stop(); err != nil {
				e.fatalf("stopping the operator to arm the crash point: %v", err)
			}
			e.opEnv, armed = env, true
			e.restart()
		}
		s.do(e)
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		last := ""
		for i := 0; ; i++ {
			if err := e.op.exited(); err != nil && !e.restartIfCrashed() {
				cancel()
				e.fatalf("step %s: %v", s.what, err)
			}
			ok, obs := s.done(ctx, e)
			if ok {
				break
			}
			if ctx.Err() == nil || last == "" {
				last = obs // not what a call cut off by the deadline says
			}
			if ctx.Err() != nil {
				cancel()
				e.fatalf("step %s: not done within %s; last seen: %s", s.what, deadline, last)
			}
			if i%4 == 0 {
				// Every second: a pending revision is held by a live operator.
				if snap, err := e.oracleSnapshot(); err == nil {
					if bad := e.unheldPending(pending, snap); len(bad) > 0 {
						cancel()
						e.fatalf("oracle: step %s: %s", s.what, strings.Join(bad, "\n  "))
					}
				}
			}
			time.Sleep(pollInterval)
		}
		cancel()
		e.checkOracle(s.oracle)
		if bad := e.neighbourViolations(before); len(bad) > 0 {
			e.fatalf("oracle: step %s: %d violation(s):\n  %s", s.what, len(bad), strings.Join(bad, "\n  "))
		}
		ends = append(ends, len(readWriteLog(t, f.Name(), e.ns)))
	}
	writes = readWriteLog(t, f.Name(), e.ns)
	if k > 0 && len(writes) >= k && e.opEnv != nil {
		// The crash point was the scenario's last write, the process dying
		// as the step's outcome showed.
		select {
		case <-e.op.Done():
		case <-time.After(10 * time.Second):
		}
		e.restartIfCrashed()
		writes = readWriteLog(t, f.Name(), e.ns)
	}
	disarmed := false
	if k > 0 && e.opEnv != nil && armed && len(writes) < k {
		// This run made fewer writes than point k (a scenario's last writes
		// may vary from run to run: a finalizer patch answered 404 or not):
		// the operator is disarmed, so that the cleanup's writes (deleting
		// what is left) do not kill it with nobody to restart it.
		if err := e.op.stop(); err != nil {
			e.fatalf("stopping the operator to disarm the crash point: %v", err)
		}
		e.opEnv, disarmed = nil, true
		e.restart()
	}
	crashed := k > 0 && e.opEnv == nil && armed && !disarmed
	switch {
	case crashed && len(writes) != k:
		e.fatalf("the operator was killed with %d writes logged, want %d", len(writes), k)
	case crashed:
		killedAt = writes[k-1]
		t.Logf("killed after write %s", killedAt)
	}
	return writes, killedAt, ends
}

// restartIfCrashed restarts the operator when the crash point killed it
// (it had the crash point's variable and was killed by SIGKILL), without
// the crash point, and reports whether it did.
func (e *env) restartIfCrashed() bool {
	e.t.Helper()
	if e.op.exited() == nil || !slices.ContainsFunc(e.opEnv, func(v string) bool {
		return strings.HasPrefix(v, operatorpkg.CrashAfterWriteEnv+"=")
	}) {
		return false
	}
	var exit *exec.ExitError
	if !errors.As(e.op.Err(), &exit) {
		return false
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return false
	}
	_ = e.op.Stop(0) // closes its log
	e.t.Logf("the operator killed itself at its crash point; restarting it")
	e.opEnv = nil
	e.restart()
	return true
}

// getHooked reads hooked/name.
func (e *env) getHooked(ctx context.Context, name string) (*nginx, error) {
	u, err := suite.dyn.Resource(hookedGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	n := &nginx{}
	return n, fromUnstructured(u, n)
}

// readWriteLog reads the lines of a crash point's write log, the test's
// namespace ns written $ns, so that the runs' logs compare.
func readWriteLog(t *testing.T, path, ns string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "/namespaces/"+ns+"/", "/namespaces/$ns/"))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
