package installtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// TestTenancyCSVRunsTheLifecycle runs the operator with the tenancy variant
// of the CSV's permissions (genbundle --tenancy: the charts' kinds read
// only, impersonate on serviceaccounts), granted as OLM grants them, and
// --require-service-account (which switches ServiceAccounts on, as the
// variant's --service-accounts=required does): the
// operator cannot create any chart object as itself, and the whole
// lifecycle — install, upgrade, an upgrade the API server refuses, recovery,
// uninstall — is written as the tenant's ServiceAccount, bound to a Role in
// its namespace. Any RBAC denial the operator meets as itself fails it.
func TestTenancyCSVRunsTheLifecycle(t *testing.T) {
	opts, err := bundle.OptionsFromBundle(tu.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	opts.Variant = bundle.VariantTenancy
	files, err := bundle.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	csv, err := bundle.ReadCSV(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := tu.Client(t, cfg)
	op, crNS := tu.Namespace(t, c, "operator"), tu.Namespace(t, c, "tenant")
	in := install{operatorNS: op, targets: []string{crNS}}
	sa := grantAsOLM(t, c, csv, in)
	sc := asServiceAccount(t, sa, in.operatorNS, crNS)
	for _, kind := range []struct{ group, resource string }{{"apps", "deployments"}, {"", "services"}, {"", "configmaps"}, {"", "serviceaccounts"}} {
		for _, verb := range []string{"create", "patch", "delete"} {
			if canI(t, sc, verb, kind.group, kind.resource, crNS) {
				t.Errorf("the operator may %s %s as itself under the tenancy CSV", verb, kind.resource)
			}
		}
	}

	// The variant impersonates ServiceAccounts, and no other user or group.
	if !canI(t, sc, "impersonate", "", "serviceaccounts", crNS) {
		t.Error("the tenancy CSV does not let the operator impersonate ServiceAccounts")
	}
	for _, res := range []string{"users", "groups"} {
		if canI(t, sc, "impersonate", "", res, crNS) {
			t.Errorf("the tenancy CSV lets the operator impersonate %s", res)
		}
	}

	// What a deletion reads when the ServiceAccount is gone.
	if err := tu.Client(t, sc).Get(context.Background(), client.ObjectKey{Name: crNS}, &corev1.Namespace{}); err != nil {
		t.Errorf("the operator may not read the namespace it watches: %v", err)
	}

	// The tenant's namespace admin: a ServiceAccount and a Role for the
	// nginx chart's objects (docs/tenancy.md's example).
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "configmaps", "serviceaccounts"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"web.helmapp.io"}, Resources: []string{"nginxes/finalizers"}, Verbs: []string{"update"}},
	}
	tu.ServiceAccount(t, c, crNS, "helm-deployer", rules, crNS)
	tu.WaitUntilAllowed(t, tu.Impersonating(cfg, crNS, "helm-deployer"), "create", "apps", "deployments", crNS, true)

	logs := &syncBuffer{}
	logger := zap.New(zap.WriteTo(logs), zap.Level(zapcore.DebugLevel))
	// With a token of its own: the operator's impersonation of
	// helm-deployer is judged on the variant's impersonate rule;
	// finalizer: always, so that the deletion is an uninstall run as them.
	operatortest.Start(t, withToken(t, sa, in.operatorNS), tu.UninstallingWatches(t), []string{crNS}, func(oc *operator.Config) {
		oc.Logger = &logger
		oc.DefaultServiceAccount, oc.RequireServiceAccount = "helm-deployer", true
		oc.RetryBase, oc.RetryMax = 200*time.Millisecond, 2*time.Second
		oc.OperatorNamespace = in.operatorNS // the pod's own, where its digest key is kept
	})
	user := "system:serviceaccount:" + in.operatorNS + ":" + sa
	t.Cleanup(func() {
		for _, line := range strings.Split(logs.String()+"\n"+globalLogs.String(), "\n") {
			if strings.Contains(line, user) && strings.Contains(line, "cannot") {
				t.Errorf("the operator met an RBAC denial as itself: %s", line)
				return
			}
		}
	})
	lifecycle(t, c, crNS)
}
