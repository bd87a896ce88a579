//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

const (
	// deadline bounds every wait: a failure bound, not a timing assertion.
	deadline = 2 * time.Minute
	// pollInterval is how often waits look; retryInterval is the pause
	// before a failed list or watch of a measurement is tried again.
	pollInterval  = 250 * time.Millisecond
	retryInterval = 100 * time.Millisecond
	// operatorStopGrace is how long the operator gets after SIGTERM (it
	// gives a running Helm action up to 30s, then 10s to record its
	// cancellation).
	operatorStopGrace = 50 * time.Second
)

var (
	nginxGVR      = schema.GroupVersionResource{Group: "web.helmapp.io", Version: "v1alpha1", Resource: "nginxes"}
	deploymentGVR = appsv1.SchemeGroupVersion.WithResource("deployments")
	podGVR        = corev1.SchemeGroupVersion.WithResource("pods")
)

// env is one test's namespace with its own operator process.
type env struct {
	t           *testing.T
	ns          string
	dir         string
	logPath     string
	watchesPath string
	// op is the operator process now running (see kill and restart).
	op *operator
	// starts counts the operator processes started, for their log names.
	starts int
	// opStarted is when the operator process now running was started.
	opStarted time.Time
	// opEnv is added to the environment of the operator processes started
	// from now on (the crash point's variables, crash_test.go).
	opEnv []string
	// opFlags are the extra flags of every operator process of the test
	// (watchOptions.operatorFlags).
	opFlags []string
	// auditFrom is the audit log's size when the test's namespace was
	// created: its requests are after it (watching_test.go).
	auditFrom int64
}

// watchOptions adjust the watches file written for a test's operator.
type watchOptions struct {
	// readinessTimeout, when set, is set on every watch.
	readinessTimeout string
	// hooked adds the test kind Hooked (test.helmapp.io/v1), released from
	// the reconciler tests' chart internal/reconciler/testdata/charts/hooked,
	// whose spec `block: true` adds a pre-install/pre-upgrade hook Job that
	// never completes; its CRD is applied.
	hooked bool
	// hookedChart, when set, is the Hooked kind's chart instead of hooked:
	// an absolute path, or a directory under test/e2e/testdata/charts; and
	// hookedStorage its watch's storage field.
	hookedChart, hookedStorage string
	// hookedFinalizer, when set, is the Hooked watch's finalizer field.
	hookedFinalizer string
	// hookedScope, when set, is the Hooked watch's scope field.
	hookedScope map[string]any
	// hookedReconcilePeriod, when set, is the Hooked watch's reconcilePeriod.
	hookedReconcilePeriod string
	// timeout, when set, is set on every watch.
	timeout string
	// maxConcurrentReconciles, when set, is set on every watch.
	maxConcurrentReconciles int
	// tested adds the test kind Bulky (test.helmapp.io/v1), released from
	// testdata/charts/jobtested, whose test hook is a Job, with
	// test: {enable: true}; its CRD is applied.
	tested bool
	// testedChart, when set, is the chart of the Bulky kind instead of
	// jobtested (a directory under testdata/charts); ignoreTestFailures sets
	// its test.ignoreFailures.
	testedChart        string
	ignoreTestFailures bool
	// operatorEnv, not a watch option, is the first opEnv of the test's
	// env: added to the environment of its operator processes.
	operatorEnv []string
	// operatorFlags, not a watch option, are extra flags of the test's
	// operator processes (e.g. --service-accounts=allowed).
	operatorFlags []string
	// drift, when set, is the drift field of every watch.
	drift map[string]any
}

// testedGVR is the Bulky test kind (watchOptions.tested).
var testedGVR = schema.GroupVersionResource{Group: "test.helmapp.io", Version: "v1", Resource: "bulkies"}

// hookedGVR is the Hooked test kind (watchOptions.hooked).
var hookedGVR = schema.GroupVersionResource{Group: "test.helmapp.io", Version: "v1", Resource: "hookeds"}

// newEnv creates a namespace and starts an operator watching only it, with a
// copy of the repository's watches.yaml (chart paths made absolute). Cleanup
// deletes the test's resources while the operator still runs (so their
// releases are uninstalled), stops the operator and deletes the namespace.
func newEnv(t *testing.T, prefix string, w watchOptions) *env {
	t.Helper()
	e := &env{t: t, ns: prefix + "-" + rand.String(5), dir: testDir(t), opEnv: w.operatorEnv, opFlags: w.operatorFlags, auditFrom: auditSize()}
	e.logPath = filepath.Join(e.dir, "operator.log")
	e.kubectl("create", "namespace", e.ns)
	t.Cleanup(func() {
		if _, err := e.tryKubectl("delete", "namespace", e.ns, "--wait=false", "--ignore-not-found"); err != nil {
			t.Errorf("deleting namespace %s: %v", e.ns, err)
		}
	})

	if w.hooked {
		crd := filepath.Join(suite.root, "internal", "reconciler", "testdata", "crds", "test.helmapp.io_hookeds.yaml")
		e.kubectl("apply", "-f", crd)
		e.kubectl("wait", "--for=condition=Established", "crd/hookeds.test.helmapp.io", "--timeout="+deadline.String())
	}
	if w.tested {
		crd := filepath.Join(suite.root, "internal", "reconciler", "testdata", "crds", "test.helmapp.io_bulkies.yaml")
		e.kubectl("apply", "-f", crd)
		e.kubectl("wait", "--for=condition=Established", "crd/bulkies.test.helmapp.io", "--timeout="+deadline.String())
	}
	e.watchesPath = filepath.Join(e.dir, "watches.yaml")
	if err := writeWatches(e.watchesPath, w); err != nil {
		t.Fatal(err)
	}
	e.restart()
	t.Cleanup(func() {
		if err := e.op.stop(); err != nil {
			t.Errorf("%v (operator log: %s)", err, e.logPath)
		}
	})
	kinds := []string{"nginx"}
	if w.hooked {
		kinds = append(kinds, "hookeds")
	}
	if w.tested {
		kinds = append(kinds, "bulkies")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		for _, kind := range kinds {
			if _, err := suite.cp.Kubectl(ctx, "delete", kind, "--all", "-n", e.ns, "--timeout=90s"); err != nil {
				t.Errorf("deleting the test's resources (the operator uninstalls their releases): %v (operator log: %s)", err, e.logPath)
			}
		}
	})
	return e
}

// restart starts an operator process for the test (the first, or one after
// kill), logging to operator.log, then operator-2.log, ...
func (e *env) restart() {
	e.t.Helper()
	e.starts++
	if e.starts > 1 {
		e.logPath = filepath.Join(e.dir, fmt.Sprintf("operator-%d.log", e.starts))
	}
	e.opStarted = time.Now()
	op, err := startOperatorEnv(e.dir, e.watchesPath, e.logPath, e.ns, suite.cp.KubeconfigPath, e.opEnv, e.opFlags...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.op = op
	e.t.Logf("namespace %s; operator pid %d, log %s", e.ns, op.Pid(), e.logPath)
}

// kill kills the operator process with SIGKILL, as the kernel's OOM killer
// or a node failure would, and waits until it is gone. Restart it with
// restart before the test ends.
func (e *env) kill() {
	e.t.Helper()
	if err := e.op.Kill(syscall.SIGKILL); err != nil {
		e.fatalf("%v", err)
	}
	e.t.Logf("operator pid %d killed (%v)", e.op.Pid(), e.op.Err())
}

// writeWatches writes the repository's watches.yaml with absolute chart
// paths and w applied.
func writeWatches(path string, w watchOptions) error {
	b, err := os.ReadFile(filepath.Join(suite.root, "watches.yaml"))
	if err != nil {
		return err
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(b, &entries); err != nil {
		return fmt.Errorf("reading watches.yaml: %w", err)
	}
	for _, entry := range entries {
		if chart, ok := entry["chart"].(string); ok && !filepath.IsAbs(chart) {
			entry["chart"] = filepath.Join(suite.root, chart)
		}
		if w.readinessTimeout != "" {
			entry["readinessTimeout"] = w.readinessTimeout
		}
	}
	if w.hooked {
		entry := map[string]any{"group": hookedGVR.Group, "version": hookedGVR.Version, "kind": "Hooked",
			"chart": filepath.Join(suite.root, "internal", "reconciler", "testdata", "charts", "hooked")}
		if w.hookedChart != "" {
			chart := w.hookedChart
			if !filepath.IsAbs(chart) {
				chart = filepath.Join(suite.root, "test", "e2e", "testdata", "charts", chart)
			}
			entry["chart"] = chart
		}
		if w.hookedStorage != "" {
			entry["storage"] = w.hookedStorage
		}
		if w.hookedFinalizer != "" {
			entry["finalizer"] = w.hookedFinalizer
		}
		if w.hookedScope != nil {
			entry["scope"] = w.hookedScope
		}
		if w.hookedReconcilePeriod != "" {
			entry["reconcilePeriod"] = w.hookedReconcilePeriod
		}
		entries = append(entries, entry)
	}
	if w.tested {
		chart := "jobtested"
		if w.testedChart != "" {
			chart = w.testedChart
		}
		test := map[string]any{"enable": true}
		if w.ignoreTestFailures {
			test["ignoreFailures"] = true
		}
		entries = append(entries, map[string]any{"group": testedGVR.Group, "version": testedGVR.Version, "kind": "Bulky",
			"chart": filepath.Join(suite.root, "test", "e2e", "testdata", "charts", chart), "test": test})
	}
	for _, entry := range entries {
		// The paths where tests place specSecret: since issue 42 a value of
		// the spec is redacted only where marked secret (docs/status.md).
		entry["sensitiveValues"] = []string{"page.title", "data.token"}
		if w.timeout != "" {
			entry["timeout"] = w.timeout
		}
		if w.maxConcurrentReconciles > 0 {
			entry["maxConcurrentReconciles"] = w.maxConcurrentReconciles
		}
		if w.drift != nil {
			entry["drift"] = w.drift
		}
	}
	out, err := yaml.Marshal(entries)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// operator is the operator binary running as a child process.
type operator struct {
	*controlplane.Process
	logPath string
	// args are the flags it was started with.
	args []string
}

// startOperator starts the operator with the admin's credentials, env
// added to its environment.
func startOperator(dir, watchesPath, logPath, namespace string, env ...string) (*operator, error) {
	return startOperatorEnv(dir, watchesPath, logPath, namespace, suite.cp.KubeconfigPath, env)
}

// startOperatorAs starts the operator with the credentials of kubeconfig and
// the extra flags.
func startOperatorAs(dir, watchesPath, logPath, namespace, kubeconfig string, extra ...string) (*operator, error) {
	return startOperatorEnv(dir, watchesPath, logPath, namespace, kubeconfig, nil, extra...)
}

// startOperatorEnv is startOperatorAs with env added to the operator's
// environment.
func startOperatorEnv(dir, watchesPath, logPath, namespace, kubeconfig string, env []string, extra ...string) (*operator, error) {
	args := []string{"--watches-file=" + watchesPath, "--metrics-bind-address=0", "--health-probe-bind-address=0"}
	// E2E_OPERATOR_FLAGS adds flags, e.g. --zap-log-level=debug when chasing a failure.
	args = append(args, extra...)
	args = append(args, strings.Fields(os.Getenv("E2E_OPERATOR_FLAGS"))...)
	// Its own process group (a terminal's Ctrl-C reaches the test binary,
	// which stops it in order); killed by the kernel if the test binary dies.
	p, err := controlplane.StartProcess(controlplane.Command{Name: "the operator", Binary: suite.manager, Args: args, Dir: dir,
		Env: append([]string{"KUBECONFIG=" + kubeconfig, "WATCH_NAMESPACE=" + namespace}, env...), LogPath: logPath, KillWithParent: true})
	if err != nil {
		return nil, err
	}
	return &operator{Process: p, logPath: logPath, args: args}, nil
}

// exited returns an error when the operator is no longer running.
func (op *operator) exited() error { return op.Exited() }

// stop sends SIGTERM and waits; after operatorStopGrace it kills. It returns
// once the process is reaped.
func (op *operator) stop() error {
	if op.Exited() != nil {
		_ = op.Stop(0) // closes the log
		return fmt.Errorf("the operator had exited before the end of the test: %v", op.Err())
	}
	if err := op.Stop(operatorStopGrace); err != nil {
		return err
	}
	if op.Err() != nil {
		return fmt.Errorf("the operator exited with %v after SIGTERM", op.Err())
	}
	return nil
}

// kubectl runs kubectl in the test's namespace, failing the test on error.
func (e *env) kubectl(args ...string) string {
	e.t.Helper()
	out, err := e.tryKubectl(args...)
	if err != nil {
		e.fatalf("%v", err)
	}
	return out
}

func (e *env) tryKubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline+30*time.Second)
	defer cancel()
	return suite.cp.Kubectl(ctx, append([]string{"-n", e.ns}, args...)...)
}

// apply writes manifest into the test's directory and applies it.
func (e *env) apply(name, manifest string) {
	e.t.Helper()
	p := filepath.Join(e.dir, name+".yaml")
	if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.kubectl("apply", "-f", p)
}

// applyNginx applies an Nginx named name with the given spec (YAML, indented
// two spaces under spec:).
func (e *env) applyNginx(name, spec string) {
	e.t.Helper()
	e.apply("nginx-"+name, fmt.Sprintf("apiVersion: web.helmapp.io/v1alpha1\nkind: Nginx\nmetadata:\n  name: %s\nspec:\n%s", name, spec))
}

// waitCondition runs `kubectl wait --for=condition=<cond>` on nginx/name.
func (e *env) waitCondition(name, cond string) {
	e.t.Helper()
	if _, err := e.tryKubectl("wait", "--for=condition="+cond, "--timeout="+deadline.String(), "nginx/"+name); err != nil {
		e.fatalf("%v\n%s", err, e.describeCR(name))
	}
}

// fatalf fails the test with the operator's log path.
func (e *env) fatalf(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf("%s\noperator log: %s", fmt.Sprintf(format, args...), e.logPath)
}

// nginx is the user's view of an Nginx resource: what the status contract
// promises, decoded from the API server's JSON.
type nginx struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
		Resources          *struct {
			Total    int               `json:"total"`
			Ready    int               `json:"ready"`
			NotReady []notReadyObjects `json:"notReady"`
		} `json:"resources"`
	} `json:"status"`
}

type notReadyObjects struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Message    string `json:"message"`
}

// cond returns the condition of type typ, or nil.
func (n *nginx) cond(typ string) *metav1.Condition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// is reports whether condition typ has status st and describes the
// resource's current generation.
func (n *nginx) is(typ string, st metav1.ConditionStatus) bool {
	c := n.cond(typ)
	return c != nil && c.Status == st && c.ObservedGeneration == n.Metadata.Generation
}

// String lists the conditions and status.resources, one per line.
func (n *nginx) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d, observedGeneration %d\n", n.Metadata.Generation, n.Status.ObservedGeneration)
	for _, c := range n.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s (gen %d): %s\n", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	if r := n.Status.Resources; r != nil {
		fmt.Fprintf(&b, "  resources: total %d, ready %d\n", r.Total, r.Ready)
		for _, o := range r.NotReady {
			fmt.Fprintf(&b, "    not ready: %s %s/%s %s: %s\n", o.Kind, o.Namespace, o.Name, o.Status, o.Message)
		}
	}
	return b.String()
}

// getNginx reads nginx/name from the API server.
func (e *env) getNginx(ctx context.Context, name string) (*nginx, error) {
	u, err := suite.dyn.Resource(nginxGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	n := &nginx{}
	return n, fromUnstructured(u, n)
}

// mustNginx reads nginx/name or fails the test.
func (e *env) mustNginx(name string) *nginx {
	e.t.Helper()
	n, err := e.getNginx(context.Background(), name)
	if err != nil {
		e.fatalf("reading nginx/%s: %v", name, err)
	}
	return n
}

// describeCR is the resource's conditions for a failure message.
func (e *env) describeCR(name string) string {
	n, err := e.getNginx(context.Background(), name)
	if err != nil {
		return fmt.Sprintf("nginx/%s: %v", name, err)
	}
	return "nginx/" + name + ": " + n.String()
}

// eventually polls check until it returns true. After deadline it fails the
// test with what, check's last observation, the resource's conditions and
// the operator's log path. It fails at once if the operator has exited.
func (e *env) eventually(cr, what string, check func(ctx context.Context) (bool, string)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	last := ""
	for {
		if err := e.op.exited(); err != nil {
			e.fatalf("waiting for %s: %v\n%s", what, err, e.describeCR(cr))
		}
		ok, obs := check(ctx)
		if ok {
			return
		}
		last = obs
		select {
		case <-ctx.Done():
			e.fatalf("waiting for %s: not within %s; last seen: %s\n%s", what, deadline, last, e.describeCR(cr))
		case <-time.After(pollInterval):
		}
	}
}

// waitNginx waits until cond holds for nginx/name.
func (e *env) waitNginx(name, what string, cond func(*nginx) bool) *nginx {
	e.t.Helper()
	var got *nginx
	e.eventually(name, what, func(ctx context.Context) (bool, string) {
		n, err := e.getNginx(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		got = n
		return cond(n), n.String()
	})
	return got
}

// deployment reads a Deployment of the test's namespace.
func (e *env) deployment(ctx context.Context, name string) (*appsv1.Deployment, error) {
	return suite.kube.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
}

// rolledOut reports whether d is fully rolled out and available: what kstatus
// calls Current for a Deployment.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want && deploymentAvailable(d)
}

// deploymentAvailable is the Deployment's Available condition.
func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// flip records the first moment a condition was seen to hold, by a watch in
// the background.
type flip struct {
	what string
	done chan struct{}
	at   time.Time
	// seen is the resource as it was at that moment (watchNginxFlip only).
	seen *nginx
}

// watchObjects calls fn with each object of gvr in the test's namespace
// that opts selects, as it is now and then with every version a watch
// delivers (deleted says the object was deleted), with the moment it was
// seen, until fn returns true or ctx ends. Unlike polling, it sees a state
// that lasts only milliseconds (a status written False and True again in
// quick succession, a Deployment deleted and recreated at once).
func (e *env) watchObjects(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions, fn func(u *unstructured.Unstructured, deleted bool, at time.Time) bool) {
	res := suite.dyn.Resource(gvr).Namespace(e.ns)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := res.List(ctx, opts)
			if err != nil {
				time.Sleep(retryInterval)
				continue
			}
			for i := range list.Items {
				if fn(&list.Items[i], false, time.Now()) {
					return
				}
			}
			rv = list.GetResourceVersion()
		}
		wopts := opts
		wopts.ResourceVersion = rv
		w, err := res.Watch(ctx, wopts)
		if err != nil {
			time.Sleep(retryInterval)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = "" // e.g. expired: list again
				break
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if ev.Type != watch.Bookmark && fn(u, ev.Type == watch.Deleted, time.Now()) {
				w.Stop()
				return
			}
		}
		w.Stop()
	}
}

// watchNginx calls fn with nginx/name as watchObjects sees it, deletions
// aside.
func (e *env) watchNginx(ctx context.Context, name string, fn func(n *nginx, at time.Time) bool) {
	e.watchObjects(ctx, nginxGVR, metav1.ListOptions{FieldSelector: "metadata.name=" + name},
		func(u *unstructured.Unstructured, deleted bool, at time.Time) bool {
			if deleted {
				return false
			}
			n := &nginx{}
			return fromUnstructured(u, n) == nil && fn(n, at)
		})
}

// deploymentFlip records the first moment Deployment name satisfies cond
// (deleted: that version was its deletion), seen through a watch.
func (e *env) deploymentFlip(name, what string, cond func(d *appsv1.Deployment, deleted bool) bool) *flip {
	f := &flip{what: what, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	e.t.Cleanup(cancel)
	go func() {
		defer close(f.done)
		e.watchObjects(ctx, deploymentGVR, metav1.ListOptions{FieldSelector: "metadata.name=" + name},
			func(u *unstructured.Unstructured, deleted bool, at time.Time) bool {
				d := &appsv1.Deployment{}
				if fromUnstructured(u, d) != nil || !cond(d, deleted) {
					return false
				}
				f.at = at
				return true
			})
	}()
	return f
}

// unschedulableFlip records the first moment a pod of release has
// PodScheduled=False, seen through a watch.
func (e *env) unschedulableFlip(release string) *flip {
	f := &flip{what: "a pod of " + release + " has PodScheduled=False", done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	e.t.Cleanup(cancel)
	go func() {
		defer close(f.done)
		e.watchObjects(ctx, podGVR, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release},
			func(u *unstructured.Unstructured, deleted bool, at time.Time) bool {
				p := &corev1.Pod{}
				if deleted || fromUnstructured(u, p) != nil {
					return false
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						f.at = at
						return true
					}
				}
				return false
			})
	}()
	return f
}

// fromUnstructured decodes u into out through JSON, as a client would.
func fromUnstructured(u *unstructured.Unstructured, out any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// watchNginxFlip records the first moment nginx/name satisfies cond, seen
// through a watch (see watchNginx); the moment is when the watch delivered it.
func (e *env) watchNginxFlip(name, what string, cond func(*nginx) bool) *flip {
	f := &flip{what: what, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	e.t.Cleanup(cancel)
	go func() {
		defer close(f.done)
		e.watchNginx(ctx, name, func(n *nginx, at time.Time) bool {
			if !cond(n) {
				return false
			}
			f.at, f.seen = at, n
			return true
		})
	}()
	return f
}

// transition is one change of a condition's status, as a watch saw it.
type transition struct {
	at      time.Time
	status  metav1.ConditionStatus
	reason  string
	message string
}

// conditionRecorder records every change of one condition of a resource.
type conditionRecorder struct {
	mu   sync.Mutex
	seen []transition
	stop func()
	done chan struct{}
}

// recordCondition records the status changes of condition typ of nginx/name
// until the returned recorder's finish is called.
func (e *env) recordCondition(name, typ string) *conditionRecorder {
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	e.t.Cleanup(cancel)
	r := &conditionRecorder{stop: cancel, done: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		defer close(r.done)
		e.watchNginx(ctx, name, func(n *nginx, at time.Time) bool {
			select {
			case <-started:
			default:
				close(started) // the first call is the state before any change
			}
			c := n.cond(typ)
			if c == nil {
				return false
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.seen) == 0 || r.seen[len(r.seen)-1].status != c.Status {
				r.seen = append(r.seen, transition{at: at, status: c.Status, reason: c.Reason, message: c.Message})
			}
			return false
		})
	}()
	select {
	case <-started:
	case <-r.done:
	}
	return r
}

// finish stops recording and returns the transitions, the first being the
// state when recording started.
func (r *conditionRecorder) finish() []transition {
	r.stop()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// when waits for f and returns the moment it was first seen.
func (e *env) when(f *flip, cr string) time.Time {
	e.t.Helper()
	select {
	case <-f.done:
	case <-time.After(deadline):
	}
	if f.at.IsZero() {
		e.fatalf("waiting for %s: not within %s\n%s", f.what, deadline, e.describeCR(cr))
	}
	return f.at
}

// logDelay logs a measured delay in the suite's format; a figure, not an
// assertion.
func (e *env) logDelay(label string, from, to *flip, cr string) {
	e.t.Helper()
	a, b := e.when(from, cr), e.when(to, cr)
	e.t.Logf("%s: %.2fs (from %q to %q)", label, b.Sub(a).Seconds(), from.what, to.what)
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
