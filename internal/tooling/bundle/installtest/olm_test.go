package installtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// install is an OperatorGroup's view of where the operator runs and what it
// watches.
type install struct {
	// operatorNS is where OLM runs the operator's Deployment.
	operatorNS string
	// targets are the OperatorGroup's target namespaces; nil means all
	// namespaces (AllNamespaces).
	targets []string
}

// grantAsOLM creates the CSV's ServiceAccount in the operator's namespace and
// grants it exactly the CSV's permissions and clusterPermissions, as OLM does
// for the install mode (the operator-lifecycle-manager's install strategy and
// OperatorGroup controllers):
//
//   - each `permissions` entry becomes a Role and RoleBinding in the
//     operator's namespace, copied into every target namespace; for
//     AllNamespaces it is also granted cluster-wide as a ClusterRole and
//     ClusterRoleBinding;
//   - each `clusterPermissions` entry becomes a ClusterRole and
//     ClusterRoleBinding, whatever the install mode.
//
// OLM also adds get/list/watch on namespaces to the AllNamespaces
// ClusterRole; that rule is left out, so a need for it would show. It
// returns the ServiceAccount's name. Cluster-scoped objects are removed when
// the test ends.
func grantAsOLM(t *testing.T, c client.Client, csv *v1alpha1.ClusterServiceVersion, in install) string {
	t.Helper()
	st := csv.Spec.InstallStrategy.StrategySpec
	if len(st.DeploymentSpecs) != 1 {
		t.Fatalf("the CSV has %d deployments, want 1", len(st.DeploymentSpecs))
	}
	sa := st.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
	create(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: in.operatorNS}})
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: in.operatorNS}}

	namespaces := append([]string{in.operatorNS}, in.targets...)
	for i, p := range st.Permissions {
		if p.ServiceAccountName != sa {
			t.Fatalf("permissions for ServiceAccount %s, not the Deployment's %s", p.ServiceAccountName, sa)
		}
		name := fmt.Sprintf("%s-perm-%d", in.operatorNS, i)
		for _, ns := range uniq(namespaces) {
			create(t, c, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: p.Rules})
			create(t, c, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
		}
		if in.targets == nil {
			grantClusterWide(t, c, name, p.Rules, subject)
		}
	}
	for i, p := range st.ClusterPermissions {
		if p.ServiceAccountName != sa {
			t.Fatalf("clusterPermissions for ServiceAccount %s, not the Deployment's %s", p.ServiceAccountName, sa)
		}
		grantClusterWide(t, c, fmt.Sprintf("%s-cperm-%d", in.operatorNS, i), p.Rules, subject)
	}
	return sa
}

func grantClusterWide(t *testing.T, c client.Client, name string, rules []rbacv1.PolicyRule, subject []rbacv1.Subject) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
	create(t, c, role)
	create(t, c, binding)
	t.Cleanup(func() {
		for _, o := range []client.Object{binding, role} {
			if err := c.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", o.GetName(), err)
			}
		}
	})
}

// asServiceAccount returns cfg impersonating the ServiceAccount sa of ns,
// with the groups a ServiceAccount token carries, once the API server
// authorizes it to create Secrets in ns (its RBAC caches are up to date).
func asServiceAccount(t *testing.T, sa, ns string, probeNS string) *rest.Config {
	t.Helper()
	sc := rest.CopyConfig(cfg)
	sc.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	cs, err := kubernetes.NewForConfig(sc)
	if err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 30*time.Second, "the ServiceAccount's RBAC to take effect", func() (bool, string) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: probeNS, Verb: "create", Resource: "secrets"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return r.Status.Allowed, r.Status.Reason
	})
	return sc
}

// canI asks, as the admin, whether the impersonated sc may do verb on
// resource (of group) in ns.
func canI(t *testing.T, sc *rest.Config, verb, group, resource, ns string) bool {
	t.Helper()
	return canIName(t, sc, verb, group, resource, ns, "")
}

// canIName is canI for the object of that name.
func canIName(t *testing.T, sc *rest.Config, verb, group, resource, ns, name string) bool {
	t.Helper()
	cs, err := kubernetes.NewForConfig(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

func create(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

func uniq(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
