package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// RoleRules reads the rules of the Role or ClusterRole in the file at path,
// relative to the repository root (config/rbac/role.yaml).
func RoleRules(t testing.TB, path string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	var r rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r.Rules
}

// ServiceAccount creates the ServiceAccount name in ns and grants it rules
// in each of grantIn (a Role and a RoleBinding, both named name), as a
// namespace's admin does; nil rules grant nothing.
func ServiceAccount(t testing.TB, c client.Client, ns, name string, rules []rbacv1.PolicyRule, grantIn ...string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := c.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/%s: %v", ns, name, err)
	}
	for _, where := range grantIn {
		Grant(t, c, where, name, rules, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name})
	}
}

// Grant creates (or replaces the rules of) the Role name in ns with rules,
// bound to subject by the RoleBinding name.
func Grant(t testing.TB, c client.Client, ns, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}
	if err := c.Create(ctx, role); apierrors.IsAlreadyExists(err) {
		old := &rbacv1.Role{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(role), old); err != nil {
			t.Fatal(err)
		}
		old.Rules = rules
		if err := c.Update(ctx, old); err != nil {
			t.Fatalf("updating Role %s/%s: %v", ns, name, err)
		}
	} else if err != nil {
		t.Fatalf("creating Role %s/%s: %v", ns, name, err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: []rbacv1.Subject{subject},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
	if err := c.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating RoleBinding %s/%s: %v", ns, name, err)
	}
}

// Impersonating returns cfg acting as the ServiceAccount name of ns, as a
// pod running as it would (the API server adds its groups).
func Impersonating(cfg *rest.Config, ns, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	return c
}

// WaitUntilAllowed waits until the API server's authorizer lets cfg's user
// do verb on resource (of group) in ns, or, with allowed false, refuses it:
// RBAC objects take effect a moment after they are written.
func WaitUntilAllowed(t testing.TB, cfg *rest.Config, verb, group, resource, ns string, allowed bool) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, fmt.Sprintf("%s of %s.%s in %s to be allowed=%v", verb, resource, group, ns, allowed), func() (bool, string) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: group, Resource: resource}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		return r.Status.Allowed == allowed, r.Status.Reason
	})
}
