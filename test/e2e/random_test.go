//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seeded random histories (issue 28, item 4): a generator, seeded, writes a
// sequence of operations over four resources of two kinds (Nginx n1 and
// n2, Echo e1 and e2) — a user's creates, spec changes good and bad,
// deletes, pauses and resumes; someone's helm upgrade, rollback and
// uninstall by hand, a release's object deleted or edited; the operator
// SIGKILLed and restarted, the API server restarted — and runs it in a
// namespace of its own, the oracle checking the namespace after each step.
//
// RANDOM_SEED (one seed) and RANDOM_STEPS (default 12) choose the history;
// without RANDOM_SEED the seeds of randomSeeds run. SOAK_MINUTES (make soak)
// runs new seeds until the time is up instead, and prints the figures.
// A failure prints the line that replays it.
func TestRandomHistories(t *testing.T) {
	steps := 12
	if s := os.Getenv("RANDOM_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RANDOM_STEPS=%q: want a positive number", s)
		}
		steps = n
	}
	if s := os.Getenv("SOAK_MINUTES"); s != "" {
		soak(t, s, steps)
		return
	}
	seeds := randomSeeds
	if s := os.Getenv("RANDOM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RANDOM_SEED=%q: want a number", s)
		}
		seeds = []uint64{seed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runHistory(t, seed, steps, &soakFigures{})
		})
	}
}

// randomSeeds are the seeds CI runs (make test-e2e): fixed, so that a run
// is reproducible; a few, to keep the suite's time.
var randomSeeds = []uint64{1, 2}

// soakFigures count what held in a soak.
type soakFigures struct {
	histories, steps, perturbations, oracleChecks int
}

// soak runs histories of new seeds (from the time) until minutes are up.
func soak(t *testing.T, minutes string, steps int) {
	m, err := strconv.ParseFloat(minutes, 64)
	if err != nil || m <= 0 {
		t.Fatalf("SOAK_MINUTES=%q: want a positive number", minutes)
	}
	end := time.Now().Add(time.Duration(m * float64(time.Minute)))
	var f soakFigures
	start := time.Now()
	first := uint64(time.Now().UnixNano() % 1_000_000_000)
	seed := first
	for time.Now().Before(end) && !t.Failed() {
		s := seed
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runHistory(t, s, steps, &f) })
		seed++
	}
	t.Logf("soak: %.1f min, %d histories of %d steps (first seed %d), %d steps, %d perturbations, %d oracle checks held; failed: %v",
		time.Since(start).Minutes(), f.histories, steps, first, f.steps, f.perturbations, f.oracleChecks, t.Failed())
}

// randomResource is the generator's model of one resource.
type randomResource struct {
	kind, name string
	exists     bool
	paused     bool
	// bad is set while the spec fails to render (Stalled ChartRenderError).
	bad bool
	// version counts the good spec changes, for a new value each time.
	version int
}

func (r *randomResource) key() string { return r.kind + "/" + r.name }

// randomStep is one operation of a history.
type randomStep struct {
	what string
	// perturbation is set for what is not a user's edit of the resource.
	perturbation bool
	do           func(e *env)
}

// generateHistory writes the history of seed: steps operations, each
// allowed by the model's state (a resource is created before it is
// changed; Helm and the release's objects are changed by hand only while
// the operator is expected to undo it: the resource installed, not paused,
// its spec good). The same seed writes the same history.
func generateHistory(seed uint64, steps int) (res []*randomResource, history []randomStep) {
	rng := rand.New(rand.NewPCG(seed, 0x28))
	res = []*randomResource{{kind: "Nginx", name: "n1"}, {kind: "Nginx", name: "n2"}, {kind: "Echo", name: "e1"}, {kind: "Echo", name: "e2"}}
	type op struct {
		weight int
		ok     func(r *randomResource) bool
		make   func(r *randomResource) randomStep
	}
	live := func(r *randomResource) bool { return r.exists && !r.paused }
	handable := func(r *randomResource) bool { return live(r) && !r.bad }
	ops := []op{
		{3, func(r *randomResource) bool { return !r.exists }, func(r *randomResource) randomStep {
			r.exists, r.version, r.bad = true, r.version+1, false
			return randomStep{what: "create " + r.key(), do: applyRandom(r)}
		}},
		{4, handable, func(r *randomResource) randomStep {
			r.version++
			return randomStep{what: "change the spec of " + r.key(), do: applyRandom(r)}
		}},
		{2, func(r *randomResource) bool { return live(r) && r.kind == "Nginx" && !r.bad }, func(r *randomResource) randomStep {
			r.bad = true
			return randomStep{what: "change the spec of " + r.key() + " to one that fails to render", do: applyRandom(r)}
		}},
		{4, func(r *randomResource) bool { return live(r) && r.bad }, func(r *randomResource) randomStep {
			r.bad, r.version = false, r.version+1
			return randomStep{what: "fix the spec of " + r.key(), do: applyRandom(r)}
		}},
		{1, live, func(r *randomResource) randomStep {
			return randomStep{what: "change the spec of " + r.key() + " to one the API server rejects", do: rejectedRandom(r)}
		}},
		{2, live, func(r *randomResource) randomStep {
			r.exists, r.bad = false, false
			return randomStep{what: "delete " + r.key(), do: func(e *env) { e.kubectl("delete", strings.ToLower(r.kind), r.name, "--wait=false") }}
		}},
		{2, live, func(r *randomResource) randomStep {
			r.paused = true
			return randomStep{what: "pause " + r.key(), do: func(e *env) {
				e.kubectl("annotate", strings.ToLower(r.kind), r.name, "helmapp.io/paused=true", "--overwrite")
			}}
		}},
		{3, func(r *randomResource) bool { return r.exists && r.paused }, func(r *randomResource) randomStep {
			r.paused = false
			return randomStep{what: "resume " + r.key(), do: func(e *env) { e.kubectl("annotate", strings.ToLower(r.kind), r.name, "helmapp.io/paused-") }}
		}},
		{2, handable, func(r *randomResource) randomStep {
			return randomStep{what: "helm upgrade " + r.name + " by hand", perturbation: true, do: func(e *env) {
				key, chart := "page.title", "nginx"
				if r.kind == "Echo" {
					key, chart = "message", "echo"
				}
				e.helmByHand(false, "upgrade", r.name, filepath.Join(suite.root, "helm-charts", chart), "--reuse-values", "--set", key+"=by-hand")
			}}
		}},
		{1, handable, func(r *randomResource) randomStep {
			// Fails when the release has one revision: that is a user's
			// mistake, and the history goes on.
			return randomStep{what: "helm rollback " + r.name + " by hand", perturbation: true, do: func(e *env) { e.helmByHand(true, "rollback", r.name) }}
		}},
		{1, handable, func(r *randomResource) randomStep {
			return randomStep{what: "helm uninstall " + r.name + " by hand", perturbation: true, do: func(e *env) { e.helmByHand(false, "uninstall", r.name) }}
		}},
		{2, handable, func(r *randomResource) randomStep {
			return randomStep{what: "delete the ConfigMap of release " + r.name, perturbation: true, do: func(e *env) {
				e.kubectl("delete", "configmap", "-l", "app.kubernetes.io/instance="+r.name, "--wait=false")
			}}
		}},
		{2, handable, func(r *randomResource) randomStep {
			return randomStep{what: "scale the Deployment of release " + r.name + " by hand", perturbation: true, do: func(e *env) {
				e.kubectl("scale", "deployment", "-l", "app.kubernetes.io/instance="+r.name, "--replicas=3")
			}}
		}},
	}
	global := []struct {
		weight int
		step   randomStep
	}{
		{1, randomStep{what: "SIGKILL the operator and restart it", perturbation: true, do: func(e *env) { e.kill(); e.restart() }}},
		{1, randomStep{what: "restart the API server", perturbation: true, do: func(e *env) { e.restartAPIServer(); e.restartIfStartFailed() }}},
	}
	// killDuring changes the spec of r and SIGKILLs the operator after a
	// delay, so that the kill may land inside the upgrade.
	killDuring := func(r *randomResource) randomStep {
		r.version++
		apply, delay := applyRandom(r), time.Duration(rng.IntN(2000))*time.Millisecond
		return randomStep{what: fmt.Sprintf("change the spec of %s, SIGKILL the operator %s later and restart it", r.key(), delay),
			perturbation: true, do: func(e *env) {
				apply(e)
				time.Sleep(delay)
				e.kill()
				e.restart()
			}}
	}
	ops = append(ops, op{2, handable, killDuring})
	for len(history) < steps {
		// Each (operation, resource) allowed now, weighted.
		type choice struct {
			weight int
			pick   func() randomStep
		}
		var choices []choice
		total := 0
		for _, o := range ops {
			for _, r := range res {
				if o.ok(r) {
					o, r := o, r
					choices = append(choices, choice{o.weight, func() randomStep { return o.make(r) }})
					total += o.weight
				}
			}
		}
		for _, g := range global {
			g := g
			choices = append(choices, choice{g.weight * 2, func() randomStep { return g.step }})
			total += g.weight * 2
		}
		n := rng.IntN(total)
		for _, c := range choices {
			if n < c.weight {
				history = append(history, c.pick())
				break
			}
			n -= c.weight
		}
	}
	return res, history
}

// applyRandom applies r's spec as the model has it: good (its version in
// a value, with specSecret beside it) or one that fails to render.
func applyRandom(r *randomResource) func(e *env) {
	kind, version, bad := r.kind, r.version, r.bad
	return func(e *env) {
		var spec string
		switch {
		case kind == "Echo":
			spec = fmt.Sprintf("  replicaCount: 1\n  message: v%d %s\n", version, specSecret)
		case bad:
			spec = fmt.Sprintf("  replicaCount: 1\n  page:\n    title: v%d %s\n  autoscaling:\n    enabled: true\n    minReplicas: 3\n    maxReplicas: 1\n", version, specSecret)
		default:
			spec = fmt.Sprintf("  replicaCount: 1\n  page:\n    title: v%d %s\n", version, specSecret)
		}
		e.apply(strings.ToLower(kind)+"-"+r.name, fmt.Sprintf("apiVersion: web.helmapp.io/v1alpha1\nkind: %s\nmetadata:\n  name: %s\nspec:\n%s", kind, r.name, spec))
	}
}

// rejectedRandom patches r with a replicaCount that is not a number: the
// API server refuses it (the CRD's schema) and nothing changes.
func rejectedRandom(r *randomResource) func(e *env) {
	return func(e *env) {
		out, err := e.tryKubectl("patch", strings.ToLower(r.kind), r.name, "--type=merge", "-p", `{"spec":{"replicaCount":"many"}}`)
		if err == nil {
			e.fatalf("the API server accepted replicaCount \"many\" for %s: %s", r.key(), out)
		}
	}
}

// helmByHand runs the helm CLI in the test's namespace; a failure fails the
// test unless mayFail.
func (e *env) helmByHand(mayFail bool, args ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := suite.cp.Helm(ctx, append(args, "-n", e.ns)...)
	switch {
	case err != nil && mayFail:
		e.t.Logf("helm %s failed, as it may: %v %s", strings.Join(args, " "), err, strings.TrimSpace(out))
	case err != nil:
		e.fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runHistory runs the history of seed in a namespace of its own, the oracle
// after each step, and counts what held in f.
func runHistory(t *testing.T, seed uint64, steps int, f *soakFigures) {
	res, history := generateHistory(seed, steps)
	var lines []string
	for i, s := range history {
		lines = append(lines, fmt.Sprintf("%d. %s", i+1, s.what))
	}
	t.Logf("seed %d, %d steps:\n  %s", seed, steps, strings.Join(lines, "\n  "))
	done := 0
	t.Cleanup(func() {
		if t.Failed() {
			at := fmt.Sprintf("step %d", done+1)
			switch {
			case done == len(history):
				at = "the end (every resource resumed)"
			case done == len(history)+1:
				at = "the end (every resource deleted)"
			case done > len(history)+1:
				at = "the test's cleanup"
			}
			t.Logf("FAILED at %s of seed %d; replay: make test-e2e RANDOM_SEED=%d RANDOM_STEPS=%d (the shortest failing prefix: RANDOM_STEPS=%d)",
				at, seed, seed, steps, min(done+1, len(history)))
		}
	})
	e := newEnv(t, fmt.Sprintf("e2e-random-%d", seed%100000), watchOptions{})
	// The model's state as it was at each step is rebuilt by replaying the
	// generator's choices, so the oracle's expectations follow the history.
	state := map[string]*randomResource{}
	for _, r := range res {
		state[r.key()] = &randomResource{kind: r.kind, name: r.name}
	}
	start := time.Now()
	for i, s := range history {
		t.Logf("step %d: %s", i+1, s.what)
		s.do(e)
		applyToModel(state, s.what)
		e.checkOracle(randomOracle(state))
		done = i + 1
		f.steps++
		f.oracleChecks++
		if s.perturbation {
			f.perturbations++
		}
	}
	// The end: every paused resource resumed (a paused resource's deletion
	// waits, docs/recovery.md), then every resource deleted; the oracle
	// after each, the releases all gone at last.
	for _, m := range res {
		if r := state[m.key()]; r.exists && r.paused {
			e.kubectl("annotate", strings.ToLower(r.kind), r.name, "helmapp.io/paused-")
			r.paused = false
		}
	}
	e.checkOracle(randomOracle(state))
	done++
	for _, m := range res {
		if r := state[m.key()]; r.exists {
			e.kubectl("delete", strings.ToLower(r.kind), r.name, "--wait=false")
			r.exists, r.bad = false, false
		}
	}
	e.checkOracle(randomOracle(state))
	done++
	f.oracleChecks += 2
	f.histories++
	t.Logf("seed %d: %d steps, then every resource resumed and deleted, every oracle check held, in %.0fs", seed, steps, time.Since(start).Seconds())
}

// applyToModel follows a step's effect on what the oracle expects: the
// resources that must settle Stalled, the releases that must be gone.
func applyToModel(state map[string]*randomResource, what string) {
	for _, r := range state {
		switch what {
		case "create " + r.key(), "fix the spec of " + r.key():
			r.exists, r.bad = true, false
		case "change the spec of " + r.key() + " to one that fails to render":
			r.bad = true
		case "delete " + r.key():
			r.exists, r.bad, r.paused = false, false, false
		case "pause " + r.key():
			r.paused = true
		case "resume " + r.key():
			r.paused = false
		}
	}
}

// randomOracle is what the oracle expects of the model's state: a
// resource whose spec fails to render settles Stalled; the release of a
// deleted resource is gone.
func randomOracle(state map[string]*randomResource) oracleOptions {
	o := oracleOptions{secrets: []string{specSecret}}
	for _, r := range state {
		switch {
		case r.exists && r.bad:
			o.stalled = append(o.stalled, r.key())
		case !r.exists && r.name != "":
			// Never created, or deleted: no record either way.
			o.gone = append(o.gone, r.name)
		}
	}
	return o
}

// restartIfStartFailed restarts the operator when it exited because it
// could not reach the API server as it started (the API server restarted
// just then): it exits with "creating the manager", and in a cluster the
// kubelet would start it again.
func (e *env) restartIfStartFailed() {
	e.t.Helper()
	select {
	case <-e.op.Done():
	case <-time.After(2 * time.Second):
		return
	}
	b, _ := os.ReadFile(e.logPath)
	if !strings.Contains(string(b), "error: creating the manager:") {
		return // the oracle reports it
	}
	_ = e.op.Stop(0) // closes its log
	e.t.Logf("the operator, starting as the API server restarted, exited (%v); restarting it as a kubelet would", e.op.Err())
	e.restart()
}
