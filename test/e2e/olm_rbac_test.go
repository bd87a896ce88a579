//go:build e2e

// The permissions OLM granted in TestInstalledByOLM, checked against the CSV.

package e2e

import (
	"context"
	"fmt"
	"slices"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkRBAC checks that what the CSV grants exists, bound to sa. The
// ClusterExtension installs in AllNamespaces mode, so OLM (as v0 does for a
// global OperatorGroup) makes each clusterPermissions entry and each
// permissions entry a ClusterRole and a ClusterRoleBinding, adding to the
// latter get, list and watch on namespaces.
func (o *olmRun) checkRBAC(csv *v1alpha1.ClusterServiceVersion, sa string) {
	o.t.Helper()
	ctx := context.Background()
	crbs, err := suite.kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: olmOwnerNameLabel + "=" + olmExtensionName})
	if err != nil {
		o.t.Fatal(err)
	}
	rules := func(name string) ([]rbacv1.PolicyRule, error) {
		r, err := suite.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	want := map[string][]rbacv1.PolicyRule{}
	for i, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		want[fmt.Sprintf("clusterPermissions[%d] (%s)", i, p.ServiceAccountName)] = p.Rules
	}
	for i, p := range csv.Spec.InstallStrategy.StrategySpec.Permissions {
		want[fmt.Sprintf("permissions[%d] (%s)", i, p.ServiceAccountName)] = append(slices.Clone(p.Rules),
			rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"namespaces"}})
	}
	for what, rs := range want {
		if !bound(rs, sa, crbs.Items, rules) {
			o.t.Errorf("no ClusterRole with the rules of the CSV's %s (%d rules) is bound to %s/%s", what, len(rs), olmInstallNamespace, sa)
		}
	}
}

// bound reports whether one of bindings binds sa to a ClusterRole whose
// rules are want (in any order).
func bound(want []rbacv1.PolicyRule, sa string, bindings []rbacv1.ClusterRoleBinding, rules func(string) ([]rbacv1.PolicyRule, error)) bool {
	for _, b := range bindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == olmInstallNamespace
		}) {
			continue
		}
		got, err := rules(b.RoleRef.Name)
		if err != nil {
			continue
		}
		if len(got) == len(want) && !slices.ContainsFunc(want, func(w rbacv1.PolicyRule) bool {
			return !slices.ContainsFunc(got, func(g rbacv1.PolicyRule) bool { return samePolicyRule(g, w) })
		}) {
			return true
		}
	}
	return false
}

func samePolicyRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}
