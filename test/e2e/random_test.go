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
// sequence of operations over five resources of three kinds (Nginx n1 and
// n2, Echo e1 and e2, Hooked h1) — a user's creates, spec changes good and
// bad, deletes, pauses and resumes, retries; someone's helm upgrade,
// rollback and uninstall by hand, a release's object deleted or edited, a
// hook that hangs then a fix, a ServiceAccount's permission removed and
// granted again; the operator SIGKILLed and restarted, the API server
// restarted — and runs it in a namespace of its own, the oracle checking
// the namespace after each step.
//
// RANDOM_SEED (one seed) and RANDOM_STEPS (default 12) choose the history,
// RANDOM_KEEP (step numbers, comma-separated) the steps of it to run;
// without RANDOM_SEED the histories of randomSeeds run. SOAK_MINUTES (make
// soak) runs new seeds until the time is up instead, and prints the
// figures. A failure prints the line that replays it, then shrinks the
// failing steps (at most RANDOM_SHRINK replays, default 8; 0: no shrinking)
// and prints the line that replays the shortest failing history found.
func TestRandomHistories(t *testing.T) {
	steps := 12
	if s := os.Getenv("RANDOM_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RANDOM_STEPS=%q: want a positive number", s)
		}
		steps = n
	}
	replays := 8
	if s := os.Getenv("RANDOM_SHRINK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("RANDOM_SHRINK=%q: want a number of replays, 0 or more", s)
		}
		replays = n
	}
	if s := os.Getenv("SOAK_MINUTES"); s != "" {
		soak(t, s, steps, replays)
		return
	}
	histories := randomSeeds
	if s := os.Getenv("RANDOM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RANDOM_SEED=%q: want a number", s)
		}
		histories = []randomSeed{{seed, steps}}
	}
	var keep []int
	if s := os.Getenv("RANDOM_KEEP"); s != "" {
		var err error
		if keep, err = parseKeep(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range histories {
		runAndShrink(t, h.seed, h.steps, keep, replays, &soakFigures{})
	}
}

// runAndShrink runs the history of seed (its steps keep; all for nil) as a
// subtest and, when it fails, shrinks the failing steps.
func runAndShrink(t *testing.T, seed uint64, steps int, keep []int, replays int, f *soakFigures) {
	var failing []int
	if t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runHistory(t, seed, steps, keep, f, &failing) }) {
		return
	}
	if replays > 0 && len(failing) > 1 {
		shrink(t, seed, steps, failing, replays)
	}
}

// randomSeed is a seed and the number of steps of its history.
type randomSeed struct {
	seed  uint64
	steps int
}

// randomSeeds are the histories CI runs (make test-e2e): fixed, so that a
// run is reproducible; together they hold every kind of step
// (TestRandomSeedsCoverEveryStepKind), within the suite's time.
var randomSeeds = []randomSeed{{96575, 26}, {2, 12}}

// soakFigures count what held in a soak.
type soakFigures struct {
	histories, steps, perturbations, oracleChecks int
}

// soak runs histories of new seeds (from the time) until minutes are up.
func soak(t *testing.T, minutes string, steps, replays int) {
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
		runAndShrink(t, seed, steps, nil, replays, &f)
		seed++
	}
	t.Logf("soak: %.1f min, %d histories of %d steps (first seed %d), %d steps, %d perturbations, %d oracle checks held; failed: %v",
		time.Since(start).Minutes(), f.histories, steps, first, f.steps, f.perturbations, f.oracleChecks, t.Failed())
}

// TestRandomSeedsCoverEveryStepKind: the histories CI runs hold, together,
// every kind of step the generator writes, and a global one as well as one
// of each resource. It runs no cluster (only the generator).
func TestRandomSeedsCoverEveryStepKind(t *testing.T) {
	seen := map[string]int{}
	total := 0
	for _, h := range randomSeeds {
		_, history := generateHistory(h.seed, h.steps)
		for _, s := range history {
			seen[s.kind]++
		}
		total += len(history)
	}
	var missing []string
	for _, k := range stepKinds {
		if seen[k.name] == 0 {
			missing = append(missing, k.name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the seeds CI runs (%v) miss the step kinds %v (seen: %v)", randomSeeds, missing, seen)
	}
	t.Logf("%d histories, %d steps: %v", len(randomSeeds), total, seen)
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

// randomResources are the resources of every history: Nginx n1 and n2 (as
// the operator), Echo e1 and e2 (as the ServiceAccount deployer, whose Role
// a step removes and grants again), Hooked h1 (chart hooked: a hook that
// hangs).
func randomResources() []*randomResource {
	return []*randomResource{{kind: "Nginx", name: "n1"}, {kind: "Nginx", name: "n2"},
		{kind: "Echo", name: "e1"}, {kind: "Echo", name: "e2"}, {kind: "Hooked", name: "h1"}}
}

// randomStep is one operation of a history.
type randomStep struct {
	// kind is the step's kind (a name of stepKinds); res the key of the
	// resource it acts on, "" for a step on the operator or the cluster.
	kind, res string
	what      string
	// perturbation is set for what is not a user's edit of the resource.
	perturbation bool
	do           func(e *env)
}

// stepKind is a kind of step: which resources it may act on (ok, given the
// model's state before it) and what it implies for the model (apply). A
// global kind (ok nil) acts on the operator or the cluster. The model is
// what the oracle expects (randomOracle), and what a shortened history is
// checked against before it is replayed (validHistory).
type stepKind struct {
	name   string
	weight int
	ok     func(r *randomResource) bool
	apply  func(r *randomResource)
	global bool
}

func live(r *randomResource) bool { return r.exists && !r.paused }

// handable: installed, not paused, its spec good — the operator must undo
// what is done to Helm or the objects by hand, and a spec change applies.
func handable(r *randomResource) bool { return live(r) && !r.bad }

// stepKinds are every kind of step the generator writes, in the order of
// its choices (the order matters to the seeds' histories).
var stepKinds = []stepKind{
	{name: "create", weight: 3, ok: func(r *randomResource) bool { return !r.exists },
		apply: func(r *randomResource) { r.exists, r.version, r.bad = true, r.version+1, false }},
	{name: "change", weight: 4, ok: handable, apply: func(r *randomResource) { r.version++ }},
	{name: "unrenderable", weight: 2, ok: func(r *randomResource) bool { return handable(r) && r.kind == "Nginx" },
		apply: func(r *randomResource) { r.bad = true }},
	{name: "fix", weight: 4, ok: func(r *randomResource) bool { return live(r) && r.bad },
		apply: func(r *randomResource) { r.bad, r.version = false, r.version+1 }},
	// Hooked's spec is untyped: the API server takes any replicaCount.
	{name: "rejected", weight: 1, ok: func(r *randomResource) bool { return live(r) && r.kind != "Hooked" }},
	{name: "delete", weight: 2, ok: live, apply: func(r *randomResource) { r.exists, r.bad, r.paused = false, false, false }},
	{name: "pause", weight: 2, ok: live, apply: func(r *randomResource) { r.paused = true }},
	{name: "resume", weight: 3, ok: func(r *randomResource) bool { return r.exists && r.paused },
		apply: func(r *randomResource) { r.paused = false }},
	{name: "helm-upgrade", weight: 2, ok: handable},
	{name: "helm-rollback", weight: 1, ok: handable},
	{name: "helm-uninstall", weight: 1, ok: handable},
	{name: "delete-configmap", weight: 2, ok: handable},
	{name: "scale", weight: 2, ok: func(r *randomResource) bool { return handable(r) && r.kind != "Hooked" }},
	{name: "kill-during-change", weight: 2, ok: handable, apply: func(r *randomResource) { r.version++ }},
	{name: "hook-hangs-then-fix", weight: 4, ok: func(r *randomResource) bool { return handable(r) && r.kind == "Hooked" },
		apply: func(r *randomResource) { r.version++ }},
	{name: "permission-removed-and-granted", weight: 2, ok: func(r *randomResource) bool { return handable(r) && r.kind == "Echo" },
		apply: func(r *randomResource) { r.version++ }},
	{name: "retry", weight: 1, ok: live},
	{name: "kill", weight: 2, global: true},
	{name: "apiserver-restart", weight: 2, global: true},
}

func findStepKind(name string) stepKind {
	for _, k := range stepKinds {
		if k.name == name {
			return k
		}
	}
	panic("no step kind " + name)
}

// generateHistory writes the history of seed: steps operations, each
// allowed by the model's state (a resource is created before it is
// changed; Helm and the release's objects are changed by hand only while
// the operator is expected to undo it: the resource installed, not paused,
// its spec good). The same seed writes the same history.
func generateHistory(seed uint64, steps int) (res []*randomResource, history []randomStep) {
	rng := rand.New(rand.NewPCG(seed, 0x28))
	res = randomResources()
	for len(history) < steps {
		// Each (kind, resource) allowed now, weighted; a global kind once.
		type choice struct {
			weight int
			k      stepKind
			r      *randomResource
		}
		var choices []choice
		total := 0
		for _, k := range stepKinds {
			if k.global {
				choices = append(choices, choice{k.weight, k, nil})
				total += k.weight
				continue
			}
			for _, r := range res {
				if k.ok(r) {
					choices = append(choices, choice{k.weight, k, r})
					total += k.weight
				}
			}
		}
		n := rng.IntN(total)
		for _, c := range choices {
			if n < c.weight {
				if c.r != nil && c.k.apply != nil {
					c.k.apply(c.r)
				}
				history = append(history, makeStep(c.k.name, c.r, rng, len(history)+1))
				break
			}
			n -= c.weight
		}
	}
	return res, history
}

// makeStep writes the step of kind on r (nil for a global kind), r's model
// already updated by the kind's apply; i is its number in the history.
func makeStep(kind string, r *randomResource, rng *rand.Rand, i int) randomStep {
	s := randomStep{kind: kind}
	if r != nil {
		s.res = r.key()
	}
	switch kind {
	case "create":
		s.what, s.do = "create "+r.key(), applyRandom(r)
	case "change":
		s.what, s.do = "change the spec of "+r.key(), applyRandom(r)
	case "unrenderable":
		s.what, s.do = "change the spec of "+r.key()+" to one that fails to render", applyRandom(r)
	case "fix":
		s.what, s.do = "fix the spec of "+r.key(), applyRandom(r)
	case "rejected":
		s.what, s.do = "change the spec of "+r.key()+" to one the API server rejects", rejectedRandom(r)
	case "delete":
		s.what = "delete " + r.key()
		s.do = func(e *env) { e.kubectl("delete", r.resource(), r.name, "--wait=false") }
	case "pause":
		s.what = "pause " + r.key()
		s.do = func(e *env) { e.kubectl("annotate", r.resource(), r.name, "helmapp.io/paused=true", "--overwrite") }
	case "resume":
		s.what = "resume " + r.key()
		s.do = func(e *env) { e.kubectl("annotate", r.resource(), r.name, "helmapp.io/paused-") }
	case "helm-upgrade":
		s.what, s.perturbation = "helm upgrade "+r.name+" by hand", true
		s.do = func(e *env) {
			chart, key := r.chart()
			e.helmByHand(false, "upgrade", r.name, chart, "--reuse-values", "--set", key+"=by-hand", "--description", byHand)
		}
	case "helm-rollback":
		// Fails when the release has one revision: that is a user's
		// mistake, and the history goes on.
		s.what, s.perturbation = "helm rollback "+r.name+" by hand", true
		s.do = func(e *env) { e.helmByHand(true, "rollback", r.name) }
	case "helm-uninstall":
		s.what, s.perturbation = "helm uninstall "+r.name+" by hand", true
		s.do = func(e *env) { e.helmByHand(false, "uninstall", r.name) }
	case "delete-configmap":
		s.what, s.perturbation = "delete the ConfigMap of release "+r.name, true
		s.do = func(e *env) {
			e.kubectl("delete", "configmap", "-l", "app.kubernetes.io/instance="+r.name, "--wait=false")
		}
	case "scale":
		s.what, s.perturbation = "scale the Deployment of release "+r.name+" by hand", true
		s.do = func(e *env) {
			e.kubectl("scale", "deployment", "-l", "app.kubernetes.io/instance="+r.name, "--replicas=3")
		}
	case "kill-during-change":
		// The kill may land inside the upgrade.
		apply, delay := applyRandom(r), time.Duration(rng.IntN(2000))*time.Millisecond
		s.what, s.perturbation = fmt.Sprintf("change the spec of %s, SIGKILL the operator %s later and restart it", r.key(), delay), true
		s.do = func(e *env) {
			apply(e)
			time.Sleep(delay)
			e.kill()
			e.restart()
		}
	case "hook-hangs-then-fix":
		s.what, s.perturbation, s.do = hangThenFix(r, rng.IntN(2) == 0)
	case "permission-removed-and-granted":
		s.what, s.perturbation, s.do = permissionRemovedAndGranted(r)
	case "retry":
		value := fmt.Sprintf("step-%d", i)
		s.what = fmt.Sprintf("ask for a retry of %s (helmapp.io/retry=%s)", r.key(), value)
		s.do = func(e *env) { e.retryRandom(r, value) }
	case "kill":
		s.what, s.perturbation = "SIGKILL the operator and restart it", true
		s.do = func(e *env) { e.kill(); e.restart() }
	case "apiserver-restart":
		s.what, s.perturbation = "restart the API server", true
		s.do = func(e *env) {
			down, starts := time.Now(), e.starts
			e.restartAPIServer()
			e.restartIfStartFailed()
			if e.starts == starts {
				e.waitOperatorWatching(e.auditFrom, down)
			}
		}
	default:
		panic("no step kind " + kind)
	}
	return s
}

// resource is r's resource name for kubectl.
func (r *randomResource) resource() string {
	if r.kind == "Hooked" {
		return "hooked"
	}
	return strings.ToLower(r.kind)
}

// chart is the path of r's chart and a value of it to set by hand.
func (r *randomResource) chart() (path, key string) {
	switch r.kind {
	case "Echo":
		return filepath.Join(suite.root, "helm-charts", "echo"), "message"
	case "Hooked":
		return filepath.Join(suite.root, "internal", "reconciler", "testdata", "charts", "hooked"), "data.greeting"
	}
	return filepath.Join(suite.root, "helm-charts", "nginx"), "page.title"
}

// applyRandom applies r's spec as the model has it: good (its version in
// a value, with specSecret beside it) or one that fails to render. An Echo
// acts as the ServiceAccount deployer.
func applyRandom(r *randomResource) func(e *env) {
	kind, version, bad := r.kind, r.version, r.bad
	return func(e *env) {
		var spec, meta string
		switch {
		case kind == "Hooked":
			spec = hookedSpec(false, fmt.Sprintf("v%d", version))
		case kind == "Echo":
			meta = "  annotations:\n    helmapp.io/service-account: deployer\n"
			spec = fmt.Sprintf("  replicaCount: 1\n  message: v%d %s\n", version, specSecret)
		case bad:
			spec = fmt.Sprintf("  replicaCount: 1\n  page:\n    title: v%d %s\n  autoscaling:\n    enabled: true\n    minReplicas: 3\n    maxReplicas: 1\n", version, specSecret)
		default:
			spec = fmt.Sprintf("  replicaCount: 1\n  page:\n    title: v%d %s\n", version, specSecret)
		}
		apiVersion := "web.helmapp.io/v1alpha1"
		if kind == "Hooked" {
			apiVersion = "test.helmapp.io/v1"
		}
		e.apply(r.resource()+"-"+r.name, fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n%sspec:\n%s", apiVersion, kind, r.name, meta, spec))
	}
}

// hookedSpec is a Hooked's spec: block adds a hook Job that never
// completes (the chart hooked).
func hookedSpec(block bool, greeting string) string {
	return fmt.Sprintf("  block: %t\n  data:\n    greeting: %s %s\n", block, greeting, specSecret)
}

// rejectedRandom patches r with a replicaCount that is not a number: the
// API server refuses it (the CRD's schema) and nothing changes.
func rejectedRandom(r *randomResource) func(e *env) {
	return func(e *env) {
		out, err := e.tryKubectl("patch", r.resource(), r.name, "--type=merge", "-p", `{"spec":{"replicaCount":"many"}}`)
		if err == nil {
			e.fatalf("the API server accepted replicaCount \"many\" for %s: %s", r.key(), out)
		}
	}
}

// hangThenFix changes the spec of the Hooked r to one whose pre-upgrade
// hook Job never completes, waits until the upgrade is held in it (its
// revision pending), then fixes the spec: the fix preempts the waiting
// upgrade (docs/recovery.md). With kill, the operator is SIGKILLed while
// the upgrade is held, the spec fixed, and a new process started: it
// unlocks the pending revision and upgrades. The oracle then expects r
// Ready at the fix.
func hangThenFix(r *randomResource, kill bool) (what string, perturbation bool, do func(e *env)) {
	version := r.version
	what = fmt.Sprintf("change the spec of %s to one whose hook hangs, then, the upgrade held in it, fix it", r.key())
	if kill {
		what = fmt.Sprintf("change the spec of %s to one whose hook hangs, then, the upgrade held in it, SIGKILL the operator, fix the spec and restart", r.key())
	}
	return what, true, func(e *env) {
		e.applyHooked(r.name, hookedSpec(true, fmt.Sprintf("v%d-hangs", version)))
		e.eventually(r.name, "the upgrade of "+r.name+" held in its hook Job", func(ctx context.Context) (bool, string) {
			h, err := e.history(r.name)
			if err != nil {
				return false, err.Error()
			}
			_, jobErr := e.tryKubectl("get", "job", r.name+"-wait")
			return jobErr == nil && len(h) > 0 && strings.HasSuffix(h[len(h)-1], "=pending-upgrade"),
				fmt.Sprintf("history %v, hook job: %v", h, jobErr)
		})
		if kill {
			e.kill()
		}
		e.applyHooked(r.name, hookedSpec(false, fmt.Sprintf("v%d", version)))
		if kill {
			e.restart()
		}
	}
}

// deployerRBAC is the ServiceAccount the Echo resources act as, a Role for
// what the echo chart creates, and (deployerBinding) its RoleBinding.
const deployerRBAC = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: deployer
rules:
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
`

func deployerBinding(ns string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: deployer
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: deployer
subjects:
- kind: ServiceAccount
  name: deployer
  namespace: %s
`, ns)
}

// permissionRemovedAndGranted removes the RoleBinding of the ServiceAccount
// the Echo r acts as, changes r's spec, waits until r says the change is
// denied (Ready=False PermissionDenied: refused by the permission check, or
// denied by the API server while a grant was still cached), and grants it
// again: the oracle then expects r Ready at its new spec with no edit.
func permissionRemovedAndGranted(r *randomResource) (what string, perturbation bool, do func(e *env)) {
	apply := applyRandom(r)
	what = fmt.Sprintf("remove the RoleBinding of ServiceAccount deployer, change the spec of %s (denied: PermissionDenied), grant it again", r.key())
	return what, true, func(e *env) {
		e.kubectl("delete", "rolebinding", "deployer")
		apply(e)
		e.eventually(r.name, r.key()+" Ready=False PermissionDenied", func(ctx context.Context) (bool, string) {
			out, err := e.tryKubectl("get", r.resource(), r.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}`)
			return err == nil && out == "PermissionDenied", fmt.Sprintf("Ready's reason %q %v", out, err)
		})
		e.apply("deployer-binding", deployerBinding(e.ns))
	}
}

// retryRandom sets helmapp.io/retry to value and waits until the status
// records it (lastHandledRetry): the operator took the request.
func (e *env) retryRandom(r *randomResource, value string) {
	e.t.Helper()
	e.kubectl("annotate", r.resource(), r.name, "helmapp.io/retry="+value, "--overwrite")
	e.eventually(r.name, r.key()+" lastHandledRetry "+value, func(ctx context.Context) (bool, string) {
		out, err := e.tryKubectl("get", r.resource(), r.name, "-o", "jsonpath={.status.lastHandledRetry}")
		return err == nil && out == value, fmt.Sprintf("lastHandledRetry %q %v", out, err)
	})
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

// validHistory tells whether steps, in this order, are each allowed by the
// model's state before them (a shortened history may not be: a fix whose
// breaking change was dropped, a resume of a resource never paused).
func validHistory(steps []randomStep) bool {
	state := modelState()
	for _, s := range steps {
		if s.res == "" {
			continue
		}
		k, r := findStepKind(s.kind), state[s.res]
		if !k.ok(r) {
			return false
		}
		if k.apply != nil {
			k.apply(r)
		}
	}
	return true
}

// repairHistory drops from the steps keep of history those the model no
// longer allows once others were dropped (a step on a resource whose
// create was dropped, a fix of a change that was): shrinking then drops a
// resource's whole story at once.
func repairHistory(history []randomStep, keep []int) []int {
	state := modelState()
	var out []int
	for _, k := range keep {
		s := history[k-1]
		if s.res != "" {
			kind, r := findStepKind(s.kind), state[s.res]
			if !kind.ok(r) {
				continue
			}
			if kind.apply != nil {
				kind.apply(r)
			}
		}
		out = append(out, k)
	}
	return out
}

// modelState is the model before any step: no resource exists.
func modelState() map[string]*randomResource {
	state := map[string]*randomResource{}
	for _, r := range randomResources() {
		state[r.key()] = r
	}
	return state
}

// selectSteps returns the steps of history numbered keep (from 1), in
// order; all of them for nil.
func selectSteps(history []randomStep, keep []int) ([]randomStep, error) {
	if keep == nil {
		return history, nil
	}
	var out []randomStep
	for _, k := range keep {
		if k < 1 || k > len(history) {
			return nil, fmt.Errorf("step %d: the history has %d", k, len(history))
		}
		out = append(out, history[k-1])
	}
	return out, nil
}

// parseKeep reads RANDOM_KEEP: step numbers, comma-separated, increasing.
func parseKeep(s string) ([]int, error) {
	var keep []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(keep) > 0 && n <= keep[len(keep)-1]) {
			return nil, fmt.Errorf("RANDOM_KEEP=%q: want increasing step numbers, comma-separated", s)
		}
		keep = append(keep, n)
	}
	return keep, nil
}

// replayLine is the make line that replays the steps keep of seed's history
// of steps steps (all of them for nil).
func replayLine(seed uint64, steps int, keep []int) string {
	line := fmt.Sprintf("make test-e2e RANDOM_SEED=%d RANDOM_STEPS=%d", seed, steps)
	if keep != nil {
		var ks []string
		for _, k := range keep {
			ks = append(ks, strconv.Itoa(k))
		}
		line += " RANDOM_KEEP=" + strings.Join(ks, ",")
	}
	return line
}

// seq is 1..n.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

// runHistory runs the steps keep (all for nil) of the history of seed in a
// namespace of its own, the oracle after each step, and counts what held in
// f. When it fails, *failing is the steps that ran up to the failing one
// (all of them when it failed at the end): the sequence to shrink.
func runHistory(t *testing.T, seed uint64, steps int, keep []int, f *soakFigures, failing *[]int) {
	_, all := generateHistory(seed, steps)
	if keep == nil {
		keep = seq(len(all))
	}
	history, err := selectSteps(all, keep)
	if err != nil {
		t.Fatalf("RANDOM_KEEP: %v", err)
	}
	if !validHistory(history) {
		t.Fatalf("the steps %v of seed %d are not a history the model allows (a step acts on a resource in a state it needs, e.g. a fix without the change it fixes)", keep, seed)
	}
	var lines []string
	for i, s := range history {
		lines = append(lines, fmt.Sprintf("%d. %s", keep[i], s.what))
	}
	t.Logf("seed %d, %d of its %d steps:\n  %s", seed, len(history), steps, strings.Join(lines, "\n  "))
	done := 0
	t.Cleanup(func() {
		if t.Failed() {
			at := fmt.Sprintf("step %d", keep[min(done, len(keep)-1)])
			switch {
			case done == len(history):
				at = "the end (every resource resumed)"
			case done == len(history)+1:
				at = "the end (every resource deleted)"
			case done > len(history)+1:
				at = "the test's cleanup"
			}
			prefix := keep[:min(done+1, len(keep))]
			if failing != nil {
				*failing = append([]int(nil), prefix...)
			}
			t.Logf("FAILED at %s of seed %d; replay: %s (the failing prefix: %s)",
				at, seed, replayLine(seed, steps, keepOrNil(keep, steps)), replayLine(seed, steps, keepOrNil(prefix, steps)))
		}
	})
	// The Echoes name the ServiceAccount deployer (annotation): ServiceAccounts switched on.
	e := newEnv(t, fmt.Sprintf("e2e-random-%d", seed%100000), watchOptions{hooked: true, operatorFlags: []string{"--service-accounts=allowed"}})
	e.apply("deployer", deployerRBAC)
	e.apply("deployer-binding", deployerBinding(e.ns))
	// The model's state, step by step, is what the oracle expects.
	state := modelState()
	start := time.Now()
	for i, s := range history {
		t.Logf("step %d: %s", keep[i], s.what)
		// A step on one resource leaves the others as they were
		// (oracle_live_test.go); one on the operator or the cluster is
		// left to checkOracle.
		var before neighbourSnapshot
		if r := state[s.res]; r != nil {
			before = e.neighbourSnapshot([]string{r.name})
		}
		s.do(e)
		if s.res != "" {
			if k := findStepKind(s.kind); k.apply != nil {
				k.apply(state[s.res])
			}
		}
		e.checkOracle(randomOracle(state))
		if bad := e.neighbourViolations(before); len(bad) > 0 {
			e.fatalf("oracle: step %d (%s): %s", keep[i], s.what, strings.Join(bad, "\n  "))
		}
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
	for _, r := range state {
		if r.exists && r.paused {
			e.kubectl("annotate", r.resource(), r.name, "helmapp.io/paused-")
			r.paused = false
		}
	}
	e.checkOracle(randomOracle(state))
	done++
	for _, r := range state {
		if r.exists {
			e.kubectl("delete", r.resource(), r.name, "--wait=false")
			r.exists, r.bad = false, false
		}
	}
	e.checkOracle(randomOracle(state))
	done++
	f.oracleChecks += 2
	f.histories++
	t.Logf("seed %d: %d steps, then every resource resumed and deleted, every oracle check held, in %.0fs", seed, len(history), time.Since(start).Seconds())
}

// keepOrNil is keep, or nil when it keeps every step of steps.
func keepOrNil(keep []int, steps int) []int {
	if len(keep) == steps {
		return nil
	}
	return keep
}

// shrink delta-debugs the failing steps of seed's history: it drops chunks
// of them (halves, then quarters, ... then single steps) and the steps the
// model no longer allows without them (repairHistory), replays each
// shorter history from a fresh namespace (a subtest), and keeps it if it
// still fails (anyhow: the oracle, a wait), within replays replays. The
// failing step itself is kept: a history without it is not tried (the
// failure was seen there; without it, it would have to show elsewhere).
func shrink(t *testing.T, seed uint64, steps int, failing []int, replays int) {
	cur := failing
	used := 0
	t.Logf("shrinking the %d failing steps of seed %d (at most %d replays; RANDOM_SHRINK)", len(cur), seed, replays)
	_, all := generateHistory(seed, steps)
	tried := map[string]bool{fmt.Sprint(cur): true}
	for chunk := len(cur) / 2; chunk >= 1 && used < replays; {
		removed := false
		for at := 0; at < len(cur)-1 && used < replays; {
			last := cur[len(cur)-1]
			cand := repairHistory(all, append(append([]int(nil), cur[:at]...), cur[min(at+chunk, len(cur)-1):]...))
			if len(cand) == 0 || cand[len(cand)-1] != last || tried[fmt.Sprint(cand)] {
				at += chunk
				continue
			}
			tried[fmt.Sprint(cand)] = true
			used++
			var again []int
			name := fmt.Sprintf("seed=%d-shrink-%d", seed, used)
			ok := t.Run(name, func(t *testing.T) { runHistory(t, seed, steps, cand, &soakFigures{}, &again) })
			if !ok && len(again) > 0 {
				t.Logf("shrink %d: %d steps %v still fail (at step %d)", used, len(again), again, again[len(again)-1])
				cur, removed = again, true
				continue // the same position, the rest shifted into it
			}
			t.Logf("shrink %d: %d steps %v pass", used, len(cand), cand)
			at += chunk
		}
		if !removed {
			if chunk == 1 {
				break
			}
			chunk = (chunk + 1) / 2
		}
	}
	t.Logf("SHRUNK seed %d to %d of its %d steps in %d replays; replay: %s", seed, len(cur), steps, used, replayLine(seed, steps, cur))
}

// randomOracle is what the oracle expects of the model's state: a
// resource whose spec fails to render settles Stalled; the release of a
// deleted resource (or one never created) is gone.
func randomOracle(state map[string]*randomResource) oracleOptions {
	o := oracleOptions{secrets: []string{specSecret}}
	for _, r := range state {
		switch {
		case r.exists && r.bad:
			o.stalled = append(o.stalled, r.key())
		case !r.exists:
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
