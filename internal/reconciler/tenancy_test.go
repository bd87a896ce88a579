package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// The tenancy tests run the real authorizer: ServiceAccounts, Roles and
// RoleBindings are created for real, and the API server's RBAC answers the
// operator's SubjectAccessReviews and its (impersonated) writes.

// tenantRules is a Role for the nginx chart's default objects (Deployment,
// Service, ConfigMap, ServiceAccount): what a namespace admin grants the
// ServiceAccount its releases are written as. without drops "resource" or
// "verb resource" ("create services") from it.
func tenantRules(without ...string) []rbacv1.PolicyRule {
	verbs := []string{"get", "list", "watch", "create", "patch", "delete"}
	rule := func(group, resource string) rbacv1.PolicyRule {
		var vs []string
		for _, v := range verbs {
			if !slices.Contains(without, v+" "+resource) {
				vs = append(vs, v)
			}
		}
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: vs}
	}
	var rules []rbacv1.PolicyRule
	for _, gr := range [][2]string{{"apps", "deployments"}, {"", "services"}, {"", "configmaps"}, {"", "serviceaccounts"}} {
		if !slices.Contains(without, gr[1]) {
			rules = append(rules, rule(gr[0], gr[1]))
		}
	}
	// Owner references with blockOwnerDeletion (OpenShift's admission).
	return append(rules, rbacv1.PolicyRule{APIGroups: []string{"web.helmapp.io"}, Resources: []string{"nginxes/finalizers"}, Verbs: []string{"update"}})
}

// operatorAs returns cfg as the ServiceAccount "operator" of the test's
// namespace, granted there the rules of the Role file (config/...), without
// the resources named in without; the operator then runs with that power
// only, as OLM runs it.
func (e *env) operatorAs(roleFile string, without ...string) *rest.Config {
	e.t.Helper()
	var rules []rbacv1.PolicyRule
	for _, r := range tu.RoleRules(e.t, roleFile) {
		r.Resources = slices.DeleteFunc(r.Resources, func(res string) bool { return slices.Contains(without, res) })
		if len(r.Resources) > 0 {
			rules = append(rules, r)
		}
	}
	tu.ServiceAccount(e.t, e.c, e.ns, "operator", rules, e.ns)
	op := tu.Impersonating(cfg, e.ns, "operator")
	tu.WaitUntilAllowed(e.t, op, "patch", "web.helmapp.io", "nginxes", e.ns, true)
	return op
}

// withServiceAccounts switches per-resource ServiceAccounts on
// (--service-accounts=allowed): a test whose resources name one, by the
// annotation or the watch, runs with it, as a deployment granting
// impersonate would (config/service-accounts, config/tenancy).
func withServiceAccounts(c *operator.Config) { c.ServiceAccounts = true }

// startAs starts the env's operator with restCfg instead of the admin's,
// watching the product's kinds only (the ones its Role names).
func (e *env) startAs(restCfg *rest.Config, mutate ...func(*operator.Config)) {
	e.t.Helper()
	logger := zapLogger(e.logs)
	ws := tu.DefaultWatches(e.t)
	if e.finalizeAlways {
		b, err := os.ReadFile(ws)
		if err != nil {
			e.t.Fatal(err)
		}
		ws = tu.WatchesFile(e.t, strings.ReplaceAll(string(b), "\n  watchDependentResources: true", "\n  watchDependentResources: true\n  "+finalizerAlways))
	}
	// The ServiceAccount's namespace is the operator's own, where it keeps
	// its digest key (as a pod's).
	mutate = append([]func(*operator.Config){func(c *operator.Config) { c.OperatorNamespace = e.ns }}, mutate...)
	e.startOp = func() func() {
		return operatortest.Start(e.t, restCfg, ws, []string{e.ns}, e.configure(logger, mutate))
	}
	e.stopOp = e.startOp()
}

// noChartObjects checks that nothing of release name exists in the
// namespace: no revision in Helm's storage, and none of the chart's objects.
func (e *env) noChartObjects(name string) {
	e.t.Helper()
	if h := history(e.t, e.ns, name); len(h) != 0 {
		e.t.Errorf("Helm stored %d revisions, want none", len(h))
	}
	ctx := context.Background()
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, o); !apierrors.IsNotFound(err) {
			e.t.Errorf("%T %s exists (or cannot be read: %v); nothing should have been created", o, name, err)
		}
	}
	cms := &corev1.ConfigMapList{}
	if err := e.c.List(ctx, cms, client.InNamespace(e.ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil || len(cms.Items) != 0 {
		e.t.Errorf("ConfigMaps of the release: %d (%v), want none", len(cms.Items), err)
	}
}

func TestTenantServiceAccountRunsTheLifecycle(t *testing.T) {
	e := newNamespace(t)
	// The uninstall as the ServiceAccount is the deletion path (envtest
	// has no garbage collector for a release that needs no finalizer).
	e.finalizeAlways = true
	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules(), e.ns)
	deployer := tu.Impersonating(cfg, e.ns, "deployer")
	tu.WaitUntilAllowed(t, deployer, "create", "apps", "deployments", e.ns, true)
	// The operator may only read the chart's kinds (the tenancy variant of
	// its Role): every object below is written as the tenant's ServiceAccount.
	op := e.operatorAs("config/tenancy/role.yaml")
	tu.WaitUntilAllowed(t, op, "create", "apps", "deployments", e.ns, false)
	// --default-service-account and --require-service-account switch
	// ServiceAccounts on (the operator impersonates).
	e.startAs(op, func(c *operator.Config) {
		c.DefaultServiceAccount, c.RequireServiceAccount = "deployer", true
	})

	ctx := context.Background()
	// What a deletion reads when the ServiceAccount is gone: the Role grants
	// get on its own namespace.
	if err := tu.Client(t, op).Get(ctx, client.ObjectKey{Name: e.ns}, &corev1.Namespace{}); err != nil {
		t.Errorf("the operator may not read the namespace it watches: %v", err)
	}
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(1)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Deployed=True/InstallSuccessful", "ReleaseFailed=False/InstallSuccessful")
	d := &appsv1.Deployment{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "web"}, d); err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u = e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
		t.Errorf("deployedRelease.revision %v, want 2", rev)
	}

	// Drift: the Service is deleted behind the operator's back, and restored
	// (as the ServiceAccount: the operator may not create Services).
	if err := e.c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	e.poke(tu.NginxGVK, "web")
	ev := e.waitEvent(u, corev1.EventTypeNormal, "DriftCorrected")
	if !strings.Contains(ev.Message, "Service web (deleted)") {
		t.Errorf("DriftCorrected says %q", ev.Message)
	}
	tu.Eventually(t, 30*time.Second, "the Service to be back", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "web"}, &corev1.Service{})
		return err == nil, fmt.Sprint(err)
	})

	if err := e.c.Delete(ctx, tu.NewCR(tu.NginxGVK, e.ns, "web", nil)); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource to be gone", func() (bool, string) {
		_, err := tu.Get(t, e.c, tu.NginxGVK, e.ns, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment survived the uninstall: %v", err)
	}
	if h := history(t, e.ns, "web"); len(h) != 0 {
		t.Errorf("%d revisions survived the uninstall", len(h))
	}
	if strings.Contains(e.logs.String(), "system:serviceaccount:"+e.ns+":operator\" cannot") {
		t.Errorf("the operator met an RBAC denial as itself: %s", e.logs.String())
	}
}

func TestMissingPermissionIsNamedBeforeAnythingChanges(t *testing.T) {
	e := newNamespace(t)
	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules("services"), e.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "apps", "deployments", e.ns, true)
	e.start(withServiceAccounts) // the annotation names one

	u := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{"replicaCount": int64(1)})
	u.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "deployer"})
	if err := e.c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	expect(t, u, "ReleaseFailed=True/PermissionDenied", "Deployed=False/NotDeployed", "Reconciling=True/Retrying")
	// Helm's install reads each object before creating it (its conflict
	// check): both are named, once, and nothing else.
	want := fmt.Sprintf("ServiceAccount %s/deployer may not: create services, get services (in %s)", e.ns, e.ns)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want+";") {
		t.Errorf("Ready's message %q, want it to begin %q", msg, want)
	}
	if rev := nested(u, "status", "failedRelease", "revision"); rev != nil && rev != int64(0) {
		t.Errorf("failedRelease.revision %v: no revision was stored", rev)
	}
	e.noChartObjects("web")

	// Only create is missing now: exactly that is named.
	tu.Grant(t, e.c, e.ns, "deployer", tenantRules("create services"), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "deployer"})
	want = fmt.Sprintf("ServiceAccount %s/deployer may not: create services (in %s);", e.ns, e.ns)
	tu.Eventually(t, time.Minute, "the message to name only create services", func() (bool, string) {
		u = e.get(tu.NginxGVK, "web")
		msg := conditionMessage(u, status.TypeReady)
		return strings.HasPrefix(msg, want), msg
	})
	e.noChartObjects("web")

	// Granting it is enough: no edit of the resource, the backoff retries.
	gen := u.GetGeneration()
	tu.Grant(t, e.c, e.ns, "deployer", tenantRules(), rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "deployer"})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Deployed=True/InstallSuccessful", "ReleaseFailed=False/InstallSuccessful")
	if u.GetGeneration() != gen {
		t.Errorf("generation %d, was %d: the resource was edited", u.GetGeneration(), gen)
	}
	if h := history(t, e.ns, "web"); len(h) != 1 || h[0].Info.Status != "deployed" {
		t.Errorf("history %d revisions, want exactly one deployed", len(h))
	}
}

func TestRequireServiceAccountStallsAResourceThatNamesNone(t *testing.T) {
	e := newNamespace(t)
	e.start(func(c *operator.Config) { c.RequireServiceAccount = true }) // switches ServiceAccounts on
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(1)})
	u := e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonServiceAccountRequired)
	expect(t, u, "Ready=False/ServiceAccountRequired", "Reconciling=False/Stalled")
	if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, release.AnnotationServiceAccount) || !strings.Contains(msg, e.ns) {
		t.Errorf("Stalled's message %q does not say how to name a ServiceAccount of %s", msg, e.ns)
	}
	e.noChartObjects("web")
	// Nothing was installed, so nothing holds its deletion.
	if err := e.c.Delete(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource to be gone", func() (bool, string) {
		_, err := tu.Get(t, e.c, tu.NginxGVK, e.ns, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestOperatorLackingAKindIsNamed(t *testing.T) {
	e := newNamespace(t)
	op := e.operatorAs("config/rbac/role.yaml", "services")
	tu.WaitUntilAllowed(t, op, "create", "", "services", e.ns, false)
	e.startAs(op)
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(1)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	want := fmt.Sprintf("The operator's own identity may not: create services, get services (in %s)", e.ns)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want+";") {
		t.Errorf("Ready's message %q, want it to begin %q", msg, want)
	}
	e.noChartObjects("web")
}

func TestUnknownServiceAccountIsNamed(t *testing.T) {
	e := newNamespace(t)
	e.start(withServiceAccounts) // the annotation names one
	u := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{"replicaCount": int64(1)})
	u.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "ghost"})
	if err := e.c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonServiceAccountNotFound)
	want := fmt.Sprintf("ServiceAccount %s/ghost, named by the annotation %s, does not exist", e.ns, release.AnnotationServiceAccount)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want) {
		t.Errorf("Ready's message %q, want it to begin %q", msg, want)
	}
	e.noChartObjects("web")
}

func TestDeletionWithoutTheServiceAccount(t *testing.T) {
	e := newNamespace(t)
	e.finalizeAlways = true // the deletion path is the subject
	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules(), e.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "apps", "deployments", e.ns, true)
	e.start(func(c *operator.Config) { c.DefaultServiceAccount = "deployer" }) // switches ServiceAccounts on
	ctx := context.Background()
	for _, name := range []string{"kept", "web"} {
		e.create(tu.NginxGVK, name, map[string]any{"replicaCount": int64(1)})
	}
	for _, name := range []string{"kept", "web"} {
		e.wait(tu.NginxGVK, name, status.TypeReady, metav1.ConditionTrue, "")
	}
	if err := e.c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "deployer"}}); err != nil {
		t.Fatal(err)
	}

	// In a namespace that stays, the uninstall cannot act as it: the
	// failure names it, and the finalizer stays.
	if err := e.c.Delete(ctx, tu.NewCR(tu.NginxGVK, e.ns, "kept", nil)); err != nil {
		t.Fatal(err)
	}
	u := e.wait(tu.NginxGVK, "kept", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUninstallError)
	if msg := conditionMessage(u, status.TypeReleaseFailed); !strings.Contains(msg, fmt.Sprintf("ServiceAccount %s/deployer", e.ns)) || !strings.Contains(msg, "does not exist") {
		t.Errorf("ReleaseFailed's message %q does not name the missing ServiceAccount", msg)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "kept"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("the Deployment of the release that was not uninstalled: %v", err)
	}

	// The escape hatch: keep the release, and the resource goes.
	e.mergePatch(tu.NginxGVK, "kept", map[string]any{"metadata": map[string]any{"annotations": map[string]any{release.AnnotationUninstallOnDelete: "false"}}})
	tu.Eventually(t, time.Minute, "the kept resource to be gone", func() (bool, string) {
		_, err := tu.Get(t, e.c, tu.NginxGVK, e.ns, "kept")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	kept := &appsv1.Deployment{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "kept"}, kept); err != nil {
		t.Errorf("the kept release's Deployment: %v", err)
	} else if refs := kept.GetOwnerReferences(); len(refs) != 0 {
		t.Errorf("the kept Deployment still has owner references %v", refs)
	}

	// The namespace's deletion completes: the uninstall is skipped.
	if err := e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 2*time.Minute, "the namespace to be deleted", func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Name: e.ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for _, name := range []string{"web"} {
		note := fmt.Sprintf("Release %s was not uninstalled: ServiceAccount %s/deployer, which it is uninstalled as, is gone, and namespace %s is being deleted", name, e.ns, e.ns)
		if logs := e.logs.String(); !strings.Contains(logs, note) || !strings.Contains(logs, `"event":"UninstallSkipped"`) {
			t.Errorf("no UninstallSkipped %q in the operator's log:\n%s", note, logs)
		}
	}
}

func zapLogger(w *syncBuffer) logr.Logger {
	return zap.New(zap.WriteTo(w), zap.Level(zapcore.InfoLevel))
}

func TestHooksPermissionsAreCheckedToo(t *testing.T) {
	e := newNamespace(t)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}}}
	tu.ServiceAccount(t, e.c, e.ns, "deployer", rules, e.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "", "configmaps", e.ns, true)
	e.start(func(c *operator.Config) { c.DefaultServiceAccount = "deployer" }) // switches ServiceAccounts on

	// The chart's pre-install hook is a Job, which Helm deletes (its
	// default policy), reads, creates and watches until it completes.
	e.create(hookedGVK, "hooked", map[string]any{"block": true})
	u := e.wait(hookedGVK, "hooked", status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	want := fmt.Sprintf("ServiceAccount %s/deployer may not: create jobs.batch, delete jobs.batch, get jobs.batch, list jobs.batch, watch jobs.batch (in %s);", e.ns, e.ns)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want) {
		t.Errorf("Ready's message %q, want it to begin %q", msg, want)
	}
	if h := history(t, e.ns, "hooked"); len(h) != 0 {
		t.Errorf("Helm stored %d revisions, want none", len(h))
	}

	// With the install's hooks disabled, nothing of the Job is needed.
	e.mergePatch(hookedGVK, "hooked", map[string]any{"metadata": map[string]any{"annotations": map[string]any{release.AnnotationInstallDisableHooks: "true"}}})
	u = e.wait(hookedGVK, "hooked", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	expect(t, u, "ReleaseFailed=False/InstallSuccessful")
}
