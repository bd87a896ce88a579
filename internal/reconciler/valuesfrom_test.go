package reconciler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// createWithValuesFrom creates an Nginx named name with spec and valuesFrom.
func (e *env) createWithValuesFrom(name string, spec map[string]any, refs ...map[string]any) *unstructured.Unstructured {
	e.t.Helper()
	u := tu.NewCR(tu.NginxGVK, e.ns, name, spec)
	items := make([]any, len(refs))
	for i, r := range refs {
		items[i] = r
	}
	u.Object["valuesFrom"] = items
	if err := e.c.Create(context.Background(), u); err != nil {
		e.t.Fatalf("creating Nginx %s: %v", name, err)
	}
	return u
}

// putSecret creates or replaces the Secret name with data and returns its
// resourceVersion.
func (e *env) putSecret(name string, data map[string]string) string {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, StringData: data}
	ctx := context.Background()
	err := e.c.Create(ctx, s)
	if err != nil {
		cur := &corev1.Secret{}
		if gerr := e.c.Get(ctx, client.ObjectKeyFromObject(s), cur); gerr != nil {
			e.t.Fatalf("creating Secret %s: %v", name, err)
		}
		cur.Data, cur.StringData = nil, data
		if err := e.c.Update(ctx, cur); err != nil {
			e.t.Fatalf("updating Secret %s: %v", name, err)
		}
		return cur.ResourceVersion
	}
	return s.ResourceVersion
}

// deployedValues are the values of the release's deployed revision, read
// with Helm's storage, and its revision.
func deployedValues(t *testing.T, ns, name string) (map[string]any, int) {
	t.Helper()
	h := history(t, ns, name)
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Info.Status == "deployed" {
			return h[i].Config, h[i].Version
		}
	}
	return nil, 0
}

func sourceVersion(u *unstructured.Unstructured, i int) (string, bool) {
	srcs, _, _ := unstructured.NestedSlice(u.Object, "status", "valuesSources")
	if i >= len(srcs) {
		return "", false
	}
	m := srcs[i].(map[string]any)
	rv, _ := m["resourceVersion"].(string)
	found, _ := m["found"].(bool)
	return rv, found
}

func pageTitle(vals map[string]any) string {
	page, _ := vals["page"].(map[string]any)
	s, _ := page["title"].(string)
	return s
}

// A password from a Secret installs, reaches the release's values and
// nowhere else (status, events, the log at every level, the resource);
// editing the Secret upgrades once; a spec and a Secret changed together
// make one revision.
func TestValuesFromSecretUpgradesOnceAndLeaksNothing(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	debug := func(c *operator.Config) {
		l := zap.New(zap.WriteTo(e.logs), zap.Level(zapcore.Level(-10))) // every V level
		c.Logger = &l
	}
	e.launch(testWatches(t), []func(*operator.Config){debug})

	pw := [3]string{"pw1-" + strings.Repeat("Hq4zT8wLm2", 3), "pw2-" + strings.Repeat("Vx9rB3nKc7", 3), "pw3-" + strings.Repeat("Jd5sP1yGf6", 3)}
	rv := e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: " + pw[0] + "\n"})
	cr := e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1), "page": map[string]any{"body": "spec body"}},
		map[string]any{"kind": "Secret", "name": "db"})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Deployed=True/InstallSuccessful")
	vals, rev := deployedValues(t, e.ns, "web")
	if pageTitle(vals) != pw[0] || rev != 1 {
		t.Fatalf("revision %d has page.title %q, want revision 1 with the Secret's", rev, pageTitle(vals))
	}
	if got, found := sourceVersion(u, 0); got != rv || !found {
		t.Errorf("status.valuesSources[0] = %q found=%v, want the Secret's resourceVersion %q", got, found, rv)
	}

	// Editing the Secret upgrades, once, within seconds.
	start := time.Now()
	rv = e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: " + pw[1] + "\n"})
	tu.Eventually(t, 10*time.Second, "revision 2 with the new Secret", func() (bool, string) {
		u = e.get(tu.NginxGVK, "web")
		got, _ := sourceVersion(u, 0)
		return nested(u, "status", "deployedRelease", "revision") == int64(2) && got == rv, fmt.Sprintf("%v %s", nested(u, "status", "deployedRelease"), got)
	})
	t.Logf("the Secret's edit was deployed in %s", time.Since(start).Round(time.Millisecond))
	if vals, _ := deployedValues(t, e.ns, "web"); pageTitle(vals) != pw[1] {
		t.Errorf("revision 2's page.title %q, want the edited Secret's", pageTitle(vals))
	}

	// The spec, then the Secret, changed together: one revision with both.
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	rv = e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: " + pw[2] + "\n"})
	tu.Eventually(t, 30*time.Second, "a revision with both changes", func() (bool, string) {
		vals, rev := deployedValues(t, e.ns, "web")
		return pageTitle(vals) == pw[2] && vals["replicaCount"] == float64(2), fmt.Sprintf("revision %d", rev)
	})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	if h := history(t, e.ns, "web"); len(h) != 3 {
		t.Errorf("history has %d revisions, want 3: the spec and the Secret changed together made more than one", len(h))
	}
	if got, _ := sourceVersion(u, 0); got != rv {
		t.Errorf("status.valuesSources[0].resourceVersion %q, want %q", got, rv)
	}

	// Nowhere but in the release: the status, the events, the log (debug
	// included), the metrics and the resource itself.
	raw, _ := json.Marshal(u.Object)
	var notes []string
	for _, ev := range e.events(cr) {
		notes = append(notes, ev.Reason+": "+ev.Message)
	}
	logs := e.logs.String()
	var exposition bytes.Buffer
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&exposition, f); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(exposition.String(), metrics.ReconcileTotal) || !strings.Contains(exposition.String(), e.ns) {
		t.Errorf("the metrics show nothing of the operator; their check proves nothing:\n%.2000s", exposition.String())
	}
	for _, where := range []struct{ name, text string }{{"the resource", string(raw)}, {"the events", strings.Join(notes, "\n")}, {"the log", logs}, {"the metrics", exposition.String()}} {
		for i, p := range pw {
			if w := leakedPiece(where.text, p); w != "" {
				t.Errorf("%q of password %d is in %s:\n%s", w, i, where.name, grepLines(where.text, w))
			}
		}
	}
	if !strings.Contains(logs, `"level":"debug"`) {
		t.Errorf("the log has no debug line; its check proves nothing for the levels below info")
	}
}

// A missing reference holds the release with its own reason, naming kind,
// name and key, and is installed as soon as it appears, whatever the
// backoff; a missing optional one is skipped; a key that is not YAML names
// the key and the line, never the content.
func TestValuesFromMissingThenCreatedAndInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, slowRetries)
	e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1)},
		map[string]any{"kind": "ConfigMap", "name": "not-there", "optional": true},
		map[string]any{"kind": "Secret", "name": "later", "valuesKey": "page.yaml"})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonValuesSourceNotFound)
	expect(t, u, "Deployed=False/NotDeployed", "Stalled=False/NotStalled")
	if srcs, _, _ := unstructured.NestedSlice(u.Object, "status", "valuesSources"); len(srcs) != 2 {
		t.Errorf("status.valuesSources %v, want both references, not found", srcs)
	} else if rv, found := sourceVersion(u, 1); found || rv != "" {
		t.Errorf("status.valuesSources[1] found=%v resourceVersion %q, want not found", found, rv)
	}
	msg := conditionMessage(u, status.TypeReady)
	if !strings.Contains(msg, "Secret later (key page.yaml) of valuesFrom does not exist") {
		t.Errorf("Ready's message %q does not name the Secret and its key", msg)
	}
	if h := history(t, e.ns, "web"); len(h) != 0 {
		t.Errorf("Helm stored %d revisions, want none", len(h))
	}
	gen := u.GetGeneration()
	t.Logf("kubectl describe (docs/status.md, Values from Secrets and ConfigMaps):\n%s", e.describe("nginx", "web"))

	// Created: installed at once (the retry backoff is an hour).
	e.putSecret("later", map[string]string{"page.yaml": "page:\n  title: from later\n"})
	tu.Eventually(t, 20*time.Second, "the install", func() (bool, string) {
		u = e.get(tu.NginxGVK, "web")
		return tu.ConditionIs(u, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful), tu.Describe(u)
	})
	if u.GetGeneration() != gen {
		t.Errorf("generation %d, was %d: the resource was edited", u.GetGeneration(), gen)
	}
	if vals, _ := deployedValues(t, e.ns, "web"); pageTitle(vals) != "from later" {
		t.Errorf("page.title %q, want the Secret's", pageTitle(vals))
	}
	if _, found := sourceVersion(u, 0); found {
		t.Errorf("the optional ConfigMap is reported found")
	}

	// Not YAML: the key and the line are named, the content is not.
	e.putSecret("later", map[string]string{"page.yaml": "page:\n  title: fine\n  body: [unclosed-Qw8secret\n"})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonValuesSourceInvalid)
	msg = conditionMessage(u, status.TypeReady)
	if !strings.Contains(msg, "Secret later (key page.yaml)") || !strings.Contains(msg, "line ") || strings.Contains(msg, "Qw8secret") {
		t.Errorf("Ready's message %q should name the key and the line, not the content", msg)
	}
}

// With tenancy on, the references are read as the resource's
// ServiceAccount: a missing get is PermissionDenied naming it, nothing is
// installed, and the grant installs without an edit.
func TestValuesFromReadAsTheResourcesIdentity(t *testing.T) {
	e := newNamespace(t)
	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules(), e.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "apps", "deployments", e.ns, true)
	e.start(withServiceAccounts)
	e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: as the tenant\n"})

	u := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{"replicaCount": int64(1)})
	u.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "deployer"})
	u.Object["valuesFrom"] = []any{map[string]any{"kind": "Secret", "name": "db"}}
	if err := e.c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	want := fmt.Sprintf("ServiceAccount %s/deployer may not: get secrets/db (in %s)", e.ns, e.ns)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want) {
		t.Errorf("Ready's message %q, want it to begin %q", msg, want)
	}
	e.noChartObjects("web")

	// A ServiceAccount that does not exist is named as such, not as a
	// missing permission.
	ghost := tu.NewCR(tu.NginxGVK, e.ns, "ghost", map[string]any{"replicaCount": int64(1)})
	ghost.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "nobody"})
	ghost.Object["valuesFrom"] = []any{map[string]any{"kind": "Secret", "name": "db"}}
	if err := e.c.Create(context.Background(), ghost); err != nil {
		t.Fatal(err)
	}
	g := e.wait(tu.NginxGVK, "ghost", status.TypeReady, metav1.ConditionFalse, status.ReasonServiceAccountNotFound)
	if msg := conditionMessage(g, status.TypeReady); !strings.Contains(msg, "nobody") || !strings.Contains(msg, "does not exist") {
		t.Errorf("Ready's message %q should say the ServiceAccount nobody does not exist", msg)
	}

	gen := u.GetGeneration()
	rules := append(tenantRules(), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"db"}, Verbs: []string{"get"}})
	tu.Grant(t, e.c, e.ns, "deployer", rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "deployer"})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	if u.GetGeneration() != gen {
		t.Errorf("generation %d, was %d: the resource was edited", u.GetGeneration(), gen)
	}
	if vals, _ := deployedValues(t, e.ns, "web"); pageTitle(vals) != "as the tenant" {
		t.Errorf("page.title %q, want the Secret's", pageTitle(vals))
	}
}

// A value from a Secret that the API server quotes back (an admission
// policy refusing the ConfigMap it was rendered into) is redacted from the
// status, the events and the log, as a value of the spec is.
func TestValuesFromSecretValueIsRedactedFromARefusal(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	debug := func(c *operator.Config) {
		l := zap.New(zap.WriteTo(e.logs), zap.Level(zapcore.Level(-10)))
		c.Logger = &l
	}
	e.launch(testWatches(t), []func(*operator.Config){slowRetries, debug})
	e.policy("quote-page", []admissionv1.NamedRuleWithOperations{rule("", "configmaps", admissionv1.Create)},
		admissionv1.Validation{Expression: "false", MessageExpression: "'refusing page: ' + object.data['index.html'].replace('\\n', ' ')"})
	e.waitDenied("ConfigMap creates", func(ctx context.Context) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.ns}, Data: map[string]string{"index.html": "x"}}
		return e.c.Create(ctx, cm, client.DryRunAll)
	})

	pw := "pw-" + strings.Repeat("Rk3mW9tXb5", 3)
	e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: " + pw + "\n"})
	cr := e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1)}, map[string]any{"kind": "Secret", "name": "db"})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	msg := conditionMessage(u, status.TypeReleaseFailed)
	if !strings.Contains(msg, "refusing page: ") || !strings.Contains(msg, status.RedactedMark) {
		t.Errorf("ReleaseFailed should quote the refusal, redacted; got %q", msg)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventInstallFailed)
	raw, _ := json.Marshal(e.get(tu.NginxGVK, "web").Object)
	var notes []string
	for _, ev := range e.events(cr) {
		notes = append(notes, ev.Reason+": "+ev.Message)
	}
	for _, where := range []struct{ name, text string }{{"the resource", string(raw)}, {"the events", strings.Join(notes, "\n")}, {"the log", e.logs.String()}} {
		if w := leakedPiece(where.text, pw); w != "" {
			t.Errorf("%q of the password is in %s:\n%s", w, where.name, grepLines(where.text, w))
		}
		if !strings.Contains(where.text, "refusing page") {
			t.Errorf("%s does not show the refusal; the check proves nothing", where.name)
		}
	}
}

// Deleting the object of an optional reference upgrades only if the merged
// values change: a ConfigMap that repeats the spec goes without a revision,
// one that set a value goes with one. The watch's own valuesFrom comes
// first, and the resource's is merged over it.
func TestValuesFromOptionalRemovalUpgradesOnlyOnChange(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "valuesFrom: [{kind: ConfigMap, name: team, optional: true}]"))
	ctx := context.Background()
	put := func(name, title string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
			Data: map[string]string{"values.yaml": "page:\n  title: " + title + "\n"}}
		if err := e.c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	put("team", "from the team")
	put("same", "from the team") // repeats what the watch's ConfigMap sets
	e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1)},
		map[string]any{"kind": "ConfigMap", "name": "same", "optional": true})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	if vals, rev := deployedValues(t, e.ns, "web"); pageTitle(vals) != "from the team" || rev != 1 {
		t.Fatalf("revision %d page.title %q", rev, pageTitle(vals))
	}
	if _, found := sourceVersion(u, 1); !found {
		t.Fatalf("the resource's ConfigMap is not reported found: %v", nested(u, "status", "valuesSources"))
	}

	// Removing "same" changes nothing merged: no revision.
	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "same"}}); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 20*time.Second, "valuesSources to say the ConfigMap is gone", func() (bool, string) {
		u = e.get(tu.NginxGVK, "web")
		_, found := sourceVersion(u, 1)
		return !found, fmt.Sprint(nested(u, "status", "valuesSources"))
	})
	if h := history(t, e.ns, "web"); len(h) != 1 {
		t.Errorf("history has %d revisions after removing a ConfigMap that changed nothing, want 1", len(h))
	}

	// Removing "team" changes the title back to the chart's: one revision.
	if err := e.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 20*time.Second, "revision 2 without the team's title", func() (bool, string) {
		vals, rev := deployedValues(t, e.ns, "web")
		return rev == 2 && pageTitle(vals) == "Welcome to nginx", fmt.Sprintf("revision %d %q", rev, pageTitle(vals))
	})
}
