package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// The permission preflight reviews get on every reference before any is
// read, and names each one the resource's ServiceAccount may not get in one
// PermissionDenied (the reads alone would stop at the first); granting get
// on exactly those objects (resourceNames) installs without an edit.
func TestValuesFromPreflightNamesEveryDeniedReference(t *testing.T) {
	e := newNamespace(t)
	tu.ServiceAccount(t, e.c, e.ns, "deployer", tenantRules(), e.ns)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, e.ns, "deployer"), "create", "apps", "deployments", e.ns, true)
	e.start(withServiceAccounts)
	e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: as the tenant\n"})

	u := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{"replicaCount": int64(1)})
	u.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "deployer"})
	u.Object["valuesFrom"] = []any{
		map[string]any{"kind": "Secret", "name": "tls", "optional": true},
		map[string]any{"kind": "Secret", "name": "db"},
	}
	if err := e.c.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionFalse, status.ReasonPermissionDenied)
	want := fmt.Sprintf("ServiceAccount %s/deployer may not: get secrets/db, get secrets/tls (in %s)", e.ns, e.ns)
	if msg := conditionMessage(u, status.TypeReady); !strings.HasPrefix(msg, want) {
		t.Errorf("Ready's message %q, want it to begin %q", msg, want)
	}
	e.noChartObjects("web")

	gen := u.GetGeneration()
	rules := append(tenantRules(), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"db", "tls"}, Verbs: []string{"get"}})
	tu.Grant(t, e.c, e.ns, "deployer", rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "deployer"})
	u = e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, "")
	if u.GetGeneration() != gen {
		t.Errorf("generation %d, was %d: the resource was edited", u.GetGeneration(), gen)
	}
	if vals, _ := deployedValues(t, e.ns, "web"); pageTitle(vals) != "as the tenant" {
		t.Errorf("page.title %q, want the Secret's", pageTitle(vals))
	}
}
