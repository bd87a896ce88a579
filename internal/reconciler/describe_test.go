package reconciler_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// defaultRetries sets the operator's default retry delays (1s, doubling, at
// most 5m), which the examples show, instead of the tests' short ones.
func defaultRetries(c *operator.Config) { c.RetryBase, c.RetryMax = time.Second, 5*time.Minute }

// holdOnStatus holds the operator's next reconcile of the Nginx name once
// it has written a status with condition typ True for reason: the status
// then stays as that reconcile left it, and no retry runs, until release is
// called (at the end of the test at the latest).
func (e *env) holdOnStatus(name, typ, reason string) (release func()) {
	var once sync.Once
	held := make(chan struct{})
	release = sync.OnceFunc(func() { close(held); e.getHold.Store(nil); e.statusPatchFault.Store(nil) })
	e.t.Cleanup(release)
	hold := func(obj client.Object) <-chan struct{} {
		if obj.GetName() == name && obj.GetObjectKind().GroupVersionKind().Kind == tu.NginxGVK.Kind {
			return held
		}
		return nil
	}
	f := func(obj client.Object) error {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetName() == name && tu.ConditionIs(u, typ, metav1.ConditionTrue, reason) {
			once.Do(func() { e.getHold.Store(&hold) })
		}
		return nil
	}
	e.statusPatchFault.Store(&f)
	return release
}

// docsBlock finds an example in docs/status.md:
//
//	<!-- describe:NAME -->
//	```text
//	...
//	```
var docsBlock = regexp.MustCompile("(?s)(<!-- describe:([a-z-]+) -->\n```text\n)(.*?)(```)")

// TestDescribeMatchesTheDocs runs the real `kubectl describe` (the binary the
// project builds) for a deployed resource, a release name conflict, a failed upgrade and a blocked
// uninstall, and compares each with its example in docs/status.md, so the
// documentation cannot drift from what users see. UPDATE_DOCS=1 rewrites the
// examples instead.
func TestDescribeMatchesTheDocs(t *testing.T) {
	t.Parallel()
	// The real retry delays; the retry of a failure is held back while it is
	// described (holdOnStatus), so each example shows the first attempt's status.
	// The blocked uninstall needs the finalizer, which the nginx chart's
	// releases do not (release.NeedsFinalizer): this watch asks for it on
	// every resource. The deployed example is taken with the default, below.
	e := newEnvWatching(t, testWatches(t, "finalizer: always"), defaultRetries)
	got := map[string]string{}
	ctx := context.Background()

	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2), "page": map[string]any{"title": "Hello"}})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	echo := e.create(tu.EchoGVK, "web", map[string]any{})
	e.wait(tu.EchoGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseNameConflict)
	got["name-conflict"] = e.describe("echo", "web")
	if err := e.c.Delete(ctx, echo); err != nil {
		t.Fatal(err)
	}
	e.waitGone(tu.EchoGVK, "web")

	e.denyBigDeployments()
	release := e.holdOnStatus("web", status.TypeReleaseFailed, status.ReasonUpgradeError)
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventUpgradeFailed)
	got["failed-upgrade"] = e.describe("nginx", "web")

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	release()
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	e.policy("keep-services", []admissionv1.NamedRuleWithOperations{rule("", "services", admissionv1.Delete)},
		admissionv1.Validation{Expression: "false", Message: "services in this namespace may not be deleted"})
	e.create(tu.NginxGVK, "probe", map[string]any{})
	e.wait(tu.NginxGVK, "probe", status.TypeReady, metav1.ConditionTrue, "")
	e.waitDenied("Service deletion", func(ctx context.Context) error {
		return e.c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns}}, client.DryRunAll)
	})
	e.holdOnStatus("web", status.TypeReleaseFailed, status.ReasonUninstallError)
	if err := e.c.Delete(ctx, e.get(tu.NginxGVK, "web")); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUninstallError)
	e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventUninstallFailed)
	got["blocked-uninstall"] = e.describe("nginx", "web")

	// Out of retries: a watch with maxRetries 2, the upgrade denied twice.
	ex := newEnvWatching(t, testWatches(t, "maxRetries: 2"), defaultRetries)
	ex.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2), "page": map[string]any{"title": "Hello"}})
	ex.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	ex.denyBigDeployments()
	ex.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	ex.waitStatus(tu.NginxGVK, "web", "the retries to be exhausted", exhausted(2, "", 2))
	got["retries-exhausted"] = ex.describe("nginx", "web")

	// Paused, and the spec changed meanwhile.
	p := newEnv(t, defaultRetries)
	p.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2), "page": map[string]any{"title": "Hello"}})
	p.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	p.waitStatus(tu.NginxGVK, "web", "Initialized to say the release is garbage-collected", func(u *unstructured.Unstructured) bool {
		return strings.Contains(conditionMessage(u, status.TypeInitialized), "garbage-collected")
	})
	got["deployed"] = p.describe("nginx", "web")
	p.annotate(tu.NginxGVK, "web", map[string]any{"helmapp.io/paused": "true"})
	p.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(3)})
	p.waitStatus(tu.NginxGVK, "web", "Paused to observe generation 2", func(u *unstructured.Unstructured) bool {
		c := tu.Condition(u, status.TypePaused)
		return c != nil && c.ObservedGeneration == 2
	})
	got["paused"] = p.describe("nginx", "web")

	// A permission the resource's ServiceAccount lacks (docs/tenancy.md).
	d := newNamespace(t)
	tu.ServiceAccount(t, d.c, d.ns, "helm-deployer", tenantRules("services"), d.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, d.ns, "helm-deployer"), "create", "apps", "deployments", d.ns, true)
	// The annotation names a ServiceAccount: ServiceAccounts switched on.
	d.start(defaultRetries, withServiceAccounts)
	d.holdOnStatus("web", status.TypeReleaseFailed, status.ReasonPermissionDenied)
	denied := tu.NewCR(tu.NginxGVK, d.ns, "web", map[string]any{"replicaCount": int64(2)})
	denied.SetAnnotations(map[string]string{"helmapp.io/service-account": "helm-deployer"})
	if err := d.c.Create(ctx, denied); err != nil {
		t.Fatal(err)
	}
	u = d.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonPermissionDenied)
	d.waitEvent(u, corev1.EventTypeWarning, reconciler.EventInstallFailed)
	got["permission-denied"] = d.describe("nginx", "web")

	path := filepath.Join(tu.RepoRoot(), "docs", "status.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	updated := docsBlock.ReplaceAllStringFunc(string(doc), func(block string) string {
		m := docsBlock.FindStringSubmatch(block)
		name, want := m[2], m[3]
		found[name] = true
		have, ok := got[name]
		if !ok {
			t.Errorf("docs/status.md has an example %q that no scenario produces", name)
			return block
		}
		if have != want && os.Getenv("UPDATE_DOCS") == "" {
			t.Errorf("docs/status.md example %q differs from what kubectl describe shows (UPDATE_DOCS=1 rewrites it):\n--- docs\n%s\n--- kubectl describe\n%s", name, want, have)
		}
		return m[1] + have + m[4]
	})
	for name := range got {
		if !found[name] {
			t.Errorf("docs/status.md lacks the example <!-- describe:%s -->", name)
		}
	}
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// describe runs kubectl describe and replaces what changes from run to run
// (names, times, ages, digests, uids) with fixed values.
func (e *env) describe(kind, name string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Let the events of the last write arrive.
	time.Sleep(time.Second)
	out, err := cp.Kubectl(ctx, "describe", kind, name, "-n", e.ns)
	if err != nil {
		e.t.Fatalf("kubectl describe: %v", err)
	}
	return normalizeDescribe(out, e.ns)
}

var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "2026-11-29T12:00:00Z"},
	{regexp.MustCompile(`[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d [+-]\d{4}`), "Sun, 29 Nov 2026 12:00:00 +0000"},
	{regexp.MustCompile(`sha256:[0-9a-f]{64}`), "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	{regexp.MustCompile(`(?m)^(  UID:\s+)\S+$`), "${1}4d3c2b1a-0000-4000-8000-000000000000"},
	{regexp.MustCompile(`(?m)^(  Resource Version:\s+)\d+$`), "${1}1234"},
	{regexp.MustCompile(`ValidatingAdmissionPolicy '[^']*' with binding '[^']*'`), "ValidatingAdmissionPolicy 'policy' with binding 'policy'"},
	// The Events table: ages vary, and with them the Age column's width
	// ("5s", "12s", "110s"): fix the age and the column.
	{regexp.MustCompile(`(?m)^(  (?:Normal|Warning)\s+\S+\s+)\S+\s+`), "${1}10s    "},
	{regexp.MustCompile(`(?m)^(  Type\s+Reason\s+)Age\s+From`), "${1}Age   From"},
	{regexp.MustCompile(`(?m)^(  ----\s+------\s+)----\s+----`), "${1}----  ----"},
	{regexp.MustCompile(`\(x\d+ over \S+\)`), "(x2 over 10s)"},
}

func normalizeDescribe(out, ns string) string {
	out = strings.ReplaceAll(out, ns, "demo")
	for _, n := range normalizers {
		out = n.re.ReplaceAllString(out, n.with)
	}
	// Column alignment in the events table depends on the widths replaced above.
	return strings.TrimRight(out, "\n") + "\n"
}
