package reconciler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"go.uber.org/zap/zapcore"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

var (
	widgetGVK = schema.GroupVersionKind{Group: "test.helmapp.io", Version: "v1", Kind: "Widget"}
	gadgetGVK = schema.GroupVersionKind{Group: "test.helmapp.io", Version: "v1", Kind: "Gadget"}
	hookedGVK = schema.GroupVersionKind{Group: "test.helmapp.io", Version: "v1", Kind: "Hooked"}
)

// defaultHookedTimeout is the timeout of the Hooked kind's watch unless a
// test sets its own (env.hookedTimeout).
const defaultHookedTimeout = "5s"

// testWatches maps the product kinds to their charts, and three test kinds
// whose specs the API server does not type: Widget to the nginx chart,
// Gadget to a test chart whose failures can be switched on, and Hooked to a
// test chart whose hook can be made to hold an action, with a short timeout.
// fields (e.g. "maxRetries: 2") are added to every entry.
func testWatches(t *testing.T, fields ...string) string {
	return testWatchesHooked(t, "", fields...)
}

// finalizerAlways is the watch field that puts the finalizer on every
// resource. The tests of a deletion's uninstall path use it for charts whose
// releases need no finalizer (release.NeedsFinalizer): envtest runs no
// garbage collector, and without the finalizer the deletion takes no path of
// the operator's.
const finalizerAlways = "finalizer: always"

// testWatchesHooked is testWatches with the Hooked watch's timeout.
func testWatchesHooked(t *testing.T, hookedTimeout string, fields ...string) string {
	gadget, err := filepath.Abs(filepath.Join("testdata", "charts", "gadget"))
	if err != nil {
		t.Fatal(err)
	}
	if hookedTimeout == "" {
		hookedTimeout = defaultHookedTimeout
	}
	more := ""
	for _, f := range fields {
		more += ", " + f
	}
	return tu.WatchesFile(t, `
- {group: web.helmapp.io, version: v1alpha1, kind: Nginx, chart: helm-charts/nginx`+more+`}
- {group: web.helmapp.io, version: v1alpha1, kind: Echo, chart: helm-charts/echo`+more+`}
- {group: test.helmapp.io, version: v1, kind: Widget, chart: helm-charts/nginx`+more+`}
- {group: test.helmapp.io, version: v1, kind: Gadget, chart: `+gadget+more+`}
- {group: test.helmapp.io, version: v1, kind: Hooked, chart: `+filepath.Join(filepath.Dir(gadget), "hooked")+`, timeout: `+hookedTimeout+more+`}
`)
}

// env is one test's namespace and operator, with the operator's parts wrapped
// so a test can count its writes, inject faults and read its logs.
type env struct {
	t  *testing.T
	c  client.Client
	ns string

	// statusPatches counts the operator's status writes; gets its reads.
	statusPatches, gets atomic.Int64
	// statusPatchFault, when set, may fail a status write before it reaches the server.
	statusPatchFault atomic.Pointer[func(obj client.Object) error]
	// failStorageQuery makes Helm's storage fail to list and read releases;
	// failStorageUpdate makes it fail to update one.
	failStorageQuery, failStorageUpdate atomic.Bool
	// failAfterDeploy, when set, makes the storage fail to list releases
	// (failStorageQuery) as soon as a revision is stored as deployed: the
	// action succeeds, reading it back fails.
	failAfterDeploy atomic.Bool
	// readFault, when set, may fail a read of the uncached reader (the
	// releases' objects); clientFault may fail getting a Helm client.
	readFault   atomic.Pointer[func(obj client.Object) error]
	clientFault atomic.Pointer[func(obj client.Object) error]
	// getHold, when set, blocks the operator's reads of a watched resource
	// for which it returns a channel, until that channel is closed.
	getHold atomic.Pointer[func(obj client.Object) <-chan struct{}]
	// objectWrites counts the operator's creates and patches of objects
	// other than the watched resources (the releases' objects).
	objectWrites atomic.Int64
	logs         *syncBuffer
	// hookedTimeout is the Hooked watch's timeout; empty for defaultHookedTimeout.
	hookedTimeout string
	// finalizeAlways gives the watches of start and startAs finalizerAlways.
	finalizeAlways bool
	// stopOp stops the running operator; startOp starts a new one, with the
	// same configuration.
	stopOp  func()
	startOp func() func()
}

func newEnv(t *testing.T, mutate ...func(*operator.Config)) *env {
	t.Helper()
	return newEnvWatching(t, testWatches(t), mutate...)
}

// restart stops the operator and starts a new process in its place: nothing
// held in memory survives, only what the cluster stores.
func (e *env) restart() {
	e.t.Helper()
	e.stopOp()
	e.stopOp = e.startOp()
}

// ownKind tells whether obj is one of the watched resources.
func ownKind(obj client.Object) bool {
	return strings.HasSuffix(obj.GetObjectKind().GroupVersionKind().Group, "helmapp.io")
}

// newEnvWatching is newEnv with the watches file at watchesPath.
func newEnvWatching(t *testing.T, watchesPath string, mutate ...func(*operator.Config)) *env {
	t.Helper()
	e := newNamespace(t)
	e.launch(watchesPath, mutate)
	return e
}

// newNamespace creates the test's namespace; start starts an operator on it.
func newNamespace(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, c: tu.Client(t, cfg), logs: &syncBuffer{}}
	e.ns = tu.Namespace(t, e.c, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:min(20, len(t.Name()))])
	return e
}

// start starts an operator on the test watches (with e.hookedTimeout) and
// returns a function that stops it (as SIGTERM does) and waits until it has
// stopped; it is stopped at the end of the test otherwise.
func (e *env) start(mutate ...func(*operator.Config)) (stop func()) {
	e.t.Helper()
	var fields []string
	if e.finalizeAlways {
		fields = append(fields, finalizerAlways)
	}
	e.launch(testWatchesHooked(e.t, e.hookedTimeout, fields...), mutate)
	return e.stopOp
}

func (e *env) launch(watchesPath string, mutate []func(*operator.Config)) {
	logger := zap.New(zap.WriteTo(e.logs), zap.Level(zapcore.InfoLevel))
	e.startOp = func() func() {
		return operatortest.Start(e.t, cfg, watchesPath, []string{e.ns}, e.configure(logger, mutate))
	}
	e.stopOp = e.startOp()
}

// configure returns the operator configuration of the env: its logger, a
// short backoff, and the wrapped client and storage driver the env's
// counters and faults need.
func (e *env) configure(logger logr.Logger, mutate []func(*operator.Config)) func(*operator.Config) {
	return func(c *operator.Config) {
		c.Logger = &logger
		c.RetryBase, c.RetryMax = 200*time.Millisecond, 2*time.Second
		c.WrapClient = func(cl client.Client) client.Client {
			return interceptor.NewClient(noWatch{cl}, interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					e.gets.Add(1)
					if h := e.getHold.Load(); h != nil && ownKind(obj) {
						obj.SetName(key.Name)
						if ch := (*h)(obj); ch != nil {
							<-ch
						}
					}
					return cl.Get(ctx, key, obj, opts...)
				},
				Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if !ownKind(obj) {
						e.objectWrites.Add(1)
					}
					return cl.Create(ctx, obj, opts...)
				},
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if !ownKind(obj) {
						e.objectWrites.Add(1)
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
				SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if f := e.statusPatchFault.Load(); f != nil {
						if err := (*f)(obj); err != nil {
							return err
						}
					}
					e.statusPatches.Add(1)
					return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
		}
		c.WrapStorage = func(d driver.Driver) driver.Driver {
			return &faultyDriver{Driver: d, fail: &e.failStorageQuery, failUpdate: &e.failStorageUpdate, failAfterDeploy: &e.failAfterDeploy}
		}
		// The storage's fault reaches the list of deployed records that
		// fills a new process' memo too: that list reads the storage.
		c.WrapPreload = func(load rel.Loader) rel.Loader {
			return func(ctx context.Context, ns string, add func(*corev1.Secret)) error {
				if e.failStorageQuery.Load() {
					return fmt.Errorf("injected: the storage could not list the deployed records of %s", ns)
				}
				return load(ctx, ns, add)
			}
		}
		c.WrapReader = func(r client.Reader) client.Reader { return faultyReader{Reader: r, fault: &e.readFault} }
		c.WrapActionClientGetter = func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return faultyGetter{ActionClientGetter: g, fault: &e.clientFault}
		}
		for _, m := range mutate {
			m(c)
		}
	}
}

// noWatch lets the interceptor wrap the manager's client, which cannot watch.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, fmt.Errorf("watch is not supported")
}

// faultyDriver is Helm's real Secret driver, whose listing can be made to fail.
type faultyDriver struct {
	driver.Driver
	fail, failUpdate, failAfterDeploy *atomic.Bool
}

func (d *faultyDriver) Update(key string, rls *release.Release) error {
	if d.failUpdate.Load() {
		return fmt.Errorf("injected: the storage could not update %s", key)
	}
	// Only a revision newly stored as deployed arms the fault: a failed
	// upgrade also writes the deployed revision back unchanged.
	newlyDeployed := false
	if rls.Info != nil && rls.Info.Status == release.StatusDeployed {
		old, err := d.Driver.Get(key)
		newlyDeployed = err != nil || old.Info == nil || old.Info.Status != release.StatusDeployed
	}
	err := d.Driver.Update(key, rls)
	if err == nil && newlyDeployed && d.failAfterDeploy.CompareAndSwap(true, false) {
		d.fail.Store(true)
	}
	return err
}

// faultyReader is the real uncached reader, whose reads can be made to fail.
type faultyReader struct {
	client.Reader
	fault *atomic.Pointer[func(obj client.Object) error]
}

func (r faultyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if f := r.fault.Load(); f != nil {
		obj.SetName(key.Name)
		obj.SetNamespace(key.Namespace)
		if err := (*f)(obj); err != nil {
			return err
		}
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// faultyGetter is the real Helm client getter, which can be made to fail.
type faultyGetter struct {
	helmclient.ActionClientGetter
	fault *atomic.Pointer[func(obj client.Object) error]
}

func (g faultyGetter) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	if f := g.fault.Load(); f != nil {
		if err := (*f)(obj); err != nil {
			return nil, err
		}
	}
	return g.ActionClientGetter.ActionClientFor(ctx, obj)
}

func (d *faultyDriver) Query(labels map[string]string) ([]*release.Release, error) {
	if d.fail.Load() {
		return nil, fmt.Errorf("injected: the storage could not list releases")
	}
	return d.Driver.Query(labels)
}

// Get fails with Query: a reconcile of a settled release reads its latest
// record alone (release.Runner.ObserveSettled).
func (d *faultyDriver) Get(key string) (*release.Release, error) {
	if d.fail.Load() {
		return nil, fmt.Errorf("injected: the storage could not read %s", key)
	}
	return d.Driver.Get(key)
}

func (d *faultyDriver) List(filter func(*release.Release) bool) ([]*release.Release, error) {
	if d.fail.Load() {
		return nil, fmt.Errorf("injected: the storage could not list releases")
	}
	return d.Driver.List(filter)
}

type syncBuffer = tu.SyncBuffer

func (e *env) create(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	e.t.Helper()
	u := tu.NewCR(gvk, e.ns, name, spec)
	if err := e.c.Create(context.Background(), u); err != nil {
		e.t.Fatalf("creating %s %s: %v", gvk.Kind, name, err)
	}
	return u
}

func (e *env) get(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := tu.Get(e.t, e.c, gvk, e.ns, name)
	if err != nil {
		e.t.Fatalf("reading %s %s: %v", gvk.Kind, name, err)
	}
	return u
}

// patchSpec merges spec into the resource's spec.
func (e *env) patchSpec(gvk schema.GroupVersionKind, name string, spec map[string]any) {
	e.t.Helper()
	e.mergePatch(gvk, name, map[string]any{"spec": spec})
}

// poke changes an annotation, which makes the operator reconcile the resource.
func (e *env) poke(gvk schema.GroupVersionKind, name string) {
	e.t.Helper()
	e.mergePatch(gvk, name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{"test.helmapp.io/poke": time.Now().Format(time.RFC3339Nano)}}})
}

func (e *env) mergePatch(gvk schema.GroupVersionKind, name string, patch map[string]any) {
	e.t.Helper()
	b, _ := json.Marshal(patch)
	u := tu.NewCR(gvk, e.ns, name, nil)
	if err := e.c.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", b)); err != nil {
		e.t.Fatalf("patching %s %s: %v", gvk.Kind, name, err)
	}
}

func (e *env) wait(gvk schema.GroupVersionKind, name, typ string, st metav1.ConditionStatus, reason string) *unstructured.Unstructured {
	e.t.Helper()
	return tu.WaitForCondition(e.t, e.c, gvk, e.ns, name, typ, st, reason)
}

// expect checks "Type=Status/Reason" conditions on u.
func expect(t *testing.T, u *unstructured.Unstructured, want ...string) {
	t.Helper()
	for _, w := range want {
		typ, rest, _ := strings.Cut(w, "=")
		st, reason, _ := strings.Cut(rest, "/")
		if !tu.ConditionIs(u, typ, metav1.ConditionStatus(st), reason) {
			t.Errorf("want %s; have %s", w, tu.Describe(u))
		}
	}
	checkContract(t, u)
}

// checkContract checks what must hold for every status: observedGeneration on
// the status and every condition (a ResourcesReady verdict not judged since
// keeps the older generation that judged it), a reason on every condition,
// one-line bounded messages.
func checkContract(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if og != u.GetGeneration() {
		t.Errorf("status.observedGeneration %d, generation %d", og, u.GetGeneration())
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		cg, _ := m["observedGeneration"].(int64)
		if m["type"] == "ResourcesReady" && cg > 0 && cg < og {
			cg = og
		}
		if m["reason"] == "" || cg != og {
			t.Errorf("condition %v: reason %q observedGeneration %v (status %d)", m["type"], m["reason"], m["observedGeneration"], og)
		}
		msg, _ := m["message"].(string)
		if strings.Contains(msg, "\n") || len(msg) > 1024 {
			t.Errorf("condition %v message is not one bounded line (%d bytes)", m["type"], len(msg))
		}
	}
}

func nested(u *unstructured.Unstructured, fields ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	return v
}

func conditionMessage(u *unstructured.Unstructured, typ string) string {
	if c := tu.Condition(u, typ); c != nil {
		return c.Message
	}
	return ""
}

// history reads the release's history with Helm's own storage, as the helm
// CLI does, oldest revision first.
func history(t *testing.T, ns, name string) []*release.Release {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns))).History(name)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	sort.Slice(h, func(i, j int) bool { return h[i].Version < h[j].Version })
	return h
}

// events returns the events about u, newest last.
func (e *env) events(u *unstructured.Unstructured) []corev1.Event {
	e.t.Helper()
	list := &corev1.EventList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(e.ns)); err != nil {
		e.t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.UID == u.GetUID() {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits for an event of reason about u and returns it.
func (e *env) waitEvent(u *unstructured.Unstructured, typ, reason string) corev1.Event {
	e.t.Helper()
	var found corev1.Event
	tu.Eventually(e.t, time.Minute, "event "+reason, func() (bool, string) {
		var seen []string
		for _, ev := range e.events(u) {
			seen = append(seen, ev.Reason)
			if ev.Reason == reason && ev.Type == typ {
				found = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %v", seen)
	})
	return found
}

// policy installs a ValidatingAdmissionPolicy bound to the test's namespace
// (see testutil.DenyInNamespace) and returns a function removing it.
func (e *env) policy(name string, rules []admissionv1.NamedRuleWithOperations, v admissionv1.Validation) func() {
	e.t.Helper()
	return tu.DenyInNamespace(e.t, e.c, e.ns+"-"+name, e.ns, rules, v)
}

// rule matches resources of a group for the given operations.
var rule = tu.Rule

// waitDenied polls a server-side dry run until the API server denies it: the
// policy is then in force.
func (e *env) waitDenied(what string, try func(ctx context.Context) error) {
	e.t.Helper()
	tu.Eventually(e.t, 30*time.Second, "the policy denying "+what+" to be in force", func() (bool, string) {
		err := try(context.Background())
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprintf("dry run gave %v", err)
	})
}
