package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A refusal — an install the preflight found the identity may not do — is
// the promise "grant them with a Role bound to it, and the release is
// retried". These tests hold the operator to it.

// createAsDeployer creates the Nginx web whose release acts as the
// ServiceAccount deployer, which may do everything the chart needs but for
// services, and waits for the refusal.
func (e *env) createAsDeployer() *unstructured.Unstructured {
	e.t.Helper()
	tu.ServiceAccount(e.t, e.c, e.ns, "deployer", tenantRules("services"), e.ns)
	tu.WaitUntilAllowed(e.t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "apps", "deployments", e.ns, true)
	u := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{"replicaCount": int64(1)})
	u.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "deployer"})
	if err := e.c.Create(context.Background(), u); err != nil {
		e.t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasSuffix(msg, "grant them with a Role bound to it, and the release is retried") {
		e.t.Errorf("Ready's message %q does not promise the retry", msg)
	}
	return u
}

// grantServices grants the deployer what it lacked, with a new Role and
// RoleBinding, as a namespace admin would.
func (e *env) grantServices() {
	e.t.Helper()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}}}
	tu.Grant(e.t, e.c, e.ns, "services", rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "deployer"})
}

// installedWithoutEdit waits for the release to be installed once the
// permission is granted, and checks that nobody edited the resource.
func (e *env) installedWithoutEdit(before *unstructured.Unstructured) {
	e.t.Helper()
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(e.t, u, "Deployed=True/InstallSuccessful", "ReleaseFailed=False/InstallSuccessful")
	if u.GetGeneration() != before.GetGeneration() || u.GetAnnotations()[release.AnnotationRetry] != "" {
		e.t.Errorf("generation %d (was %d), retry annotation %q: the resource was edited",
			u.GetGeneration(), before.GetGeneration(), u.GetAnnotations()[release.AnnotationRetry])
	}
	if h := history(e.t, e.ns, "web"); len(h) != 1 || h[0].Info.Status != "deployed" {
		e.t.Errorf("history %d revisions, want exactly one deployed", len(h))
	}
}

// refusals counts the operator's refused attempts, as its log reports them.
func (e *env) refusals() int {
	n := 0
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, `"msg":"Reconcile failed"`) && strings.Contains(l, `"reason":"PermissionDenied"`) {
			n++
		}
	}
	return n
}

// The acceptance test of issue 24: a permission granted after more denials
// than maxRetries (10, the default) installs the release, with no edit of
// the resource. A refusal writes nothing, so it does not use the budget
// that protects Helm's history.
func TestPermissionGrantedAfterMoreDenialsThanMaxRetriesInstalls(t *testing.T) {
	e := newNamespace(t)
	// A short backoff: a dozen refusals take seconds, not the 8.5 minutes
	// of the default one.
	// createAsDeployer names a ServiceAccount: ServiceAccounts switched on.
	e.start(func(c *operator.Config) { c.RetryBase, c.RetryMax = 20*time.Millisecond, 200*time.Millisecond }, withServiceAccounts)
	before := e.createAsDeployer()

	tu.Eventually(t, 2*time.Minute, "more than 10 refused installs", func() (bool, string) {
		n := e.refusals()
		return n > 10, fmt.Sprintf("%d refusals; status %v", n, e.get(tu.NginxGVK, "web").Object["status"])
	})
	u := e.get(tu.NginxGVK, "web")
	expect(t, u, "Stalled=False/NotStalled", "Reconciling=True/Retrying", "ReleaseFailed=True/PermissionDenied")
	if n := nested(u, "status", "failures"); n != nil && n != int64(0) {
		t.Errorf("status.failures %v: a refusal is not a failed attempt", n)
	}
	if msg := conditionMessage(u, status.TypeReconciling); !strings.Contains(msg, "refused before it ran") || !strings.Contains(msg, "not counted against maxRetries") {
		t.Errorf("Reconciling's message %q does not say what follows a refusal", msg)
	}
	e.noChartObjects("web")

	e.grantServices()
	e.installedWithoutEdit(before)
}

// A grant is acted on at once, not at the end of the backoff: the change to
// the namespace's RBAC wakes the refused resource.
func TestGrantWakesARefusedResourceAtOnce(t *testing.T) {
	e := newNamespace(t)
	// A backoff no test waits for: only the grant can bring the retry.
	// createAsDeployer names a ServiceAccount: ServiceAccounts switched on.
	e.start(func(c *operator.Config) { c.RetryBase, c.RetryMax = time.Hour, time.Hour }, withServiceAccounts)
	before := e.createAsDeployer()
	u := e.waitStatus(tu.NginxGVK, "web", "Reconciling to say when it tries again", func(u *unstructured.Unstructured) bool {
		return strings.Contains(conditionMessage(u, status.TypeReconciling), "trying again in 1h0m0s, or at once when a Role or RoleBinding of the resource's namespace changes")
	})
	expect(t, u, "Reconciling=True/Retrying")

	e.grantServices()
	e.installedWithoutEdit(before)
}

// "create it, or name another with the annotation": a ServiceAccount that
// does not exist refuses the install, which is retried, uncounted, and
// installs once the ServiceAccount is created.
func TestServiceAccountCreatedLaterInstalls(t *testing.T) {
	e := newNamespace(t)
	e.start(withServiceAccounts) // the annotation names one
	before := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{"replicaCount": int64(1)})
	before.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "deployer"})
	if err := e.c.Create(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonServiceAccountNotFound)
	before = u
	if msg := conditionMessage(u, status.TypeReady); !strings.Contains(msg, "does not exist: create it, or name another with the annotation") {
		t.Errorf("Ready's message %q does not say what to do", msg)
	}
	u = e.waitStatus(tu.NginxGVK, "web", "Reconciling to say the refusal is retried", func(u *unstructured.Unstructured) bool {
		msg := conditionMessage(u, status.TypeReconciling)
		return strings.Contains(msg, "The install was refused before it ran, and nothing was written; trying again in") &&
			strings.HasSuffix(msg, "not counted against maxRetries")
	})
	e.noChartObjects("web")

	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules(), e.ns)
	e.installedWithoutEdit(before)
}

// "No progress is possible until the resource names a ServiceAccount with
// the annotation helmapp.io/service-account": naming one is enough.
func TestNamingAServiceAccountEndsServiceAccountRequired(t *testing.T) {
	e := newNamespace(t)
	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules(), e.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "apps", "deployments", e.ns, true)
	e.start(func(c *operator.Config) { c.RequireServiceAccount = true }) // switches ServiceAccounts on
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(1)})
	u := e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonServiceAccountRequired)
	if msg := conditionMessage(u, status.TypeReconciling); msg != "No progress is possible until the resource names a ServiceAccount with the annotation "+release.AnnotationServiceAccount {
		t.Errorf("Reconciling's message %q", msg)
	}
	e.annotate(tu.NginxGVK, "web", map[string]any{release.AnnotationServiceAccount: "deployer"})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	expect(t, u, "Deployed=True/InstallSuccessful", "Stalled=False/NotStalled")
}
