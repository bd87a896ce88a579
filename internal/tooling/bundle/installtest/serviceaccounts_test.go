package installtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// TestDefaultCSVRefusesServiceAccounts runs the operator as the committed
// (default) CSV grants it, OwnNamespace, with ServiceAccounts off (the
// default: no --service-accounts): the CSV grants no impersonate, and a
// resource whose annotation names a ServiceAccount — one that exists and
// may write the chart's objects — is Stalled=True ServiceAccountsDisabled,
// with one line saying how to proceed, and so is one whose watch names a
// ServiceAccount; nothing is created: no chart object, no release record,
// no request the API server denies (the operator never tries to
// impersonate). Deleting such a resource lets it go; removing the
// annotation installs it as the operator.
func TestDefaultCSVRefusesServiceAccounts(t *testing.T) {
	csv, err := bundle.ReadCSV(tu.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "own")
	in := install{operatorNS: ns, targets: []string{ns}}
	sa := grantAsOLM(t, c, csv, in)
	sc := asServiceAccount(t, sa, in.operatorNS, ns)
	for _, res := range []string{"serviceaccounts", "users", "groups"} {
		if canI(t, sc, "impersonate", "", res, ns) {
			t.Errorf("the default CSV lets the operator impersonate %s", res)
		}
	}

	// A ServiceAccount that could install the chart, were it impersonated.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "configmaps", "serviceaccounts"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}
	tu.ServiceAccount(t, c, ns, "deployer", rules, ns)

	logs := &syncBuffer{}
	logger := zap.New(zap.WriteTo(logs), zap.Level(zapcore.DebugLevel))
	// With a token of its own, not impersonated by the admin: an
	// impersonation the operator tried would be judged on its own rights.
	// The Echo watch names the ServiceAccount.
	raw, err := os.ReadFile(filepath.Join(tu.RepoRoot(), "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	echoChart := "  chart: helm-charts/echo\n"
	if !strings.Contains(string(raw), echoChart) {
		t.Fatalf("watches.yaml has no %q", echoChart)
	}
	watchesPath := tu.WatchesFile(t, strings.Replace(string(raw), echoChart, echoChart+"  serviceAccount: deployer\n", 1))
	operatortest.Start(t, withToken(t, sa, in.operatorNS), watchesPath, []string{ns}, func(oc *operator.Config) {
		oc.Logger = &logger
		oc.RetryBase, oc.RetryMax = 200*time.Millisecond, 2*time.Second
		oc.OperatorNamespace = in.operatorNS // the pod's own, where its digest key is kept
	})
	user := "system:serviceaccount:" + in.operatorNS + ":" + sa
	t.Cleanup(func() {
		for _, line := range strings.Split(logs.String()+"\n"+globalLogs.String(), "\n") {
			if strings.Contains(line, user) && strings.Contains(line, "cannot") {
				t.Errorf("the operator met an RBAC denial: %s", line)
				return
			}
		}
	})

	cr := tu.NewCR(tu.NginxGVK, ns, "web", map[string]any{"replicaCount": int64(1)})
	cr.SetAnnotations(map[string]string{release.AnnotationServiceAccount: "deployer"})
	if err := c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	u := tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonServiceAccountsDisabled)
	msg := tu.Condition(u, status.TypeStalled).Message
	want := fmt.Sprintf("The annotation %s names ServiceAccount %s/deployer, but the operator runs without per-resource ServiceAccounts", release.AnnotationServiceAccount, ns)
	if !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") {
		t.Errorf("Stalled's message %q, want one line beginning %q", msg, want)
	}
	if !tu.ConditionIs(u, status.TypeReady, metav1.ConditionFalse, status.ReasonServiceAccountsDisabled) {
		t.Errorf("Ready: %s", tu.Describe(u))
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the chart's Deployment: %v, want none", err)
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "web"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d release records were stored for a refused resource", len(secrets.Items))
	}

	// The watch's serviceAccount is refused the same way; deleting the
	// resource lets it go, nothing being installed.
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "hello", map[string]any{"replicaCount": int64(1), "message": "hi"})); err != nil {
		t.Fatal(err)
	}
	e := tu.WaitForCondition(t, c, tu.EchoGVK, ns, "hello", status.TypeStalled, metav1.ConditionTrue, status.ReasonServiceAccountsDisabled)
	if msg, want := tu.Condition(e, status.TypeStalled).Message, fmt.Sprintf("The watch's serviceAccount names ServiceAccount %s/deployer, but", ns); !strings.HasPrefix(msg, want) {
		t.Errorf("the Echo's Stalled message %q, want it to begin %q", msg, want)
	}
	if err := c.Delete(ctx, e); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the Echo to be gone", func() (bool, string) {
		_, err := tu.Get(t, c, tu.EchoGVK, ns, "hello")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d release records were stored for refused resources", len(secrets.Items))
	}

	// Nothing lost: without the annotation, the operator installs it as itself.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, release.AnnotationServiceAccount)
	if err := c.Patch(ctx, tu.NewCR(tu.NginxGVK, ns, "web", nil), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	u = tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeStalled, metav1.ConditionFalse, "")
	wantReplicas(t, c, ns, 1)
	if err := c.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the CR to be gone", func() (bool, string) {
		_, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// withToken returns the admin's configuration with no credentials but a
// token of the ServiceAccount sa of ns (TokenRequest API). Unlike
// asServiceAccount's, a configuration the operator derives from it to
// impersonate someone is judged on sa's own impersonate rights, as in a
// cluster, rather than replacing the admin's impersonation.
func withToken(t *testing.T, sa, ns string) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", ns, sa, err)
	}
	tc := rest.AnonymousClientConfig(cfg)
	tc.BearerToken = tr.Status.Token
	return tc
}
