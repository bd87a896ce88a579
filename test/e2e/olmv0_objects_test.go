//go:build e2e

// The OLM v0 objects a user writes (OperatorGroup, Subscription), the
// InstallPlans approved and what OLM v0 makes of them: the CSV, its
// Deployment, ServiceAccount and RBAC.

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// olmv0TargetsAnnotation holds an OperatorGroup's target namespaces on the
// CSV and on its Deployment's pod template ("" for all namespaces).
const olmv0TargetsAnnotation = "olm.targetNamespaces"

// csvName is the CSV name of our bundle of version.
func csvName(version string) string { return olmPackage + ".v" + version }

// subscribe creates namespace ns with an OperatorGroup of targets (nil: all
// namespaces) and a Subscription to our package's candidate channel with
// installPlanApproval Manual.
func (o *olmV0) subscribe(ns string, targets []string) {
	o.t.Helper()
	o.kubectl("create", "namespace", ns)
	og := "spec: {}\n"
	if targets != nil {
		og = "spec:\n  targetNamespaces: [" + strings.Join(targets, ", ") + "]\n"
	}
	o.applyYAML("operatorgroup-"+ns, fmt.Sprintf(`apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: %s
  namespace: %s
%s`, olmPackage, ns, og))
	o.applyYAML("subscription-"+ns, subscriptionManifest(ns))
}

func subscriptionManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: %s
  namespace: %s
spec:
  channel: candidate
  name: %s
  source: %s
  sourceNamespace: %s
  installPlanApproval: Manual
`, olmPackage, ns, olmPackage, olmv0CatalogName, olmv0Namespace)
}

// approve waits for the InstallPlan of ns that would install CSV csv and
// approves it, as a user does under installPlanApproval: Manual.
func (o *olmV0) approve(ns, csv string) {
	o.t.Helper()
	var plan string
	o.eventually("an InstallPlan of "+csv+" awaiting approval in "+ns, func(ctx context.Context) (bool, string) {
		list, err := suite.dyn.Resource(installPlanGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ip := range list.Items {
			names, _, _ := unstructured.NestedStringSlice(ip.Object, "spec", "clusterServiceVersionNames")
			approved, _, _ := unstructured.NestedBool(ip.Object, "spec", "approved")
			phase := nested(ip.Object, "status", "phase")
			seen = append(seen, fmt.Sprintf("%s %v approved=%v %s", ip.GetName(), names, approved, phase))
			if slices.Contains(names, csv) && !approved && phase == "RequiresApproval" {
				plan = ip.GetName()
				return true, ""
			}
		}
		return false, o.subscriptionState(ctx, ns) + "; InstallPlans: " + strings.Join(seen, ", ")
	})
	o.kubectl("patch", "installplan/"+plan, "-n", ns, "--type=merge", "-p", `{"spec":{"approved":true}}`)
	o.t.Logf("InstallPlan %s/%s of %s approved", ns, plan, csv)
}

// subscriptionState is what the Subscription of ns says.
func (o *olmV0) subscriptionState(ctx context.Context, ns string) string {
	u, err := suite.dyn.Resource(subscriptionGVR).Namespace(ns).Get(ctx, olmPackage, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	_, conds := conditionsOf(u)
	return fmt.Sprintf("subscription %s current %s installed %s%s", nested(u.Object, "status", "state"),
		nested(u.Object, "status", "currentCSV"), nested(u.Object, "status", "installedCSV"), conds)
}

// waitCSV waits until CSV ns/name is in phase and returns it.
func (o *olmV0) waitCSV(ns, name, phase string) *v1alpha1.ClusterServiceVersion {
	o.t.Helper()
	csv := &v1alpha1.ClusterServiceVersion{}
	o.eventually(fmt.Sprintf("csv %s/%s %s", ns, name, phase), func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(csvGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, csv); err != nil {
			return false, err.Error()
		}
		return string(csv.Status.Phase) == phase, fmt.Sprintf("%s %s: %s", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	})
	o.t.Logf("csv %s/%s %s (%s: %s)", ns, name, csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	return csv
}

// operatorDeployment is the operator's Deployment OLM v0 created for CSV
// csv in ns, rolled out and running the operator image by the digest the
// bundle pinned.
func (o *olmV0) operatorDeployment(ns, csv, operatorDigest string) *appsv1.Deployment {
	o.t.Helper()
	var dep *appsv1.Deployment
	o.eventually("the Deployment of "+csv+" running "+operatorDigest, func(ctx context.Context) (bool, string) {
		list, err := suite.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: "olm.owner=" + csv})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d Deployments owned by the CSV", len(list.Items))
		}
		dep = &list.Items[0]
		var images []string
		for _, c := range dep.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		return slices.Contains(images, operatorDigest) && rolledOut(dep), fmt.Sprintf("images %s, %d available", strings.Join(images, ", "), dep.Status.AvailableReplicas)
	})
	return dep
}

// checkRBACv0 checks that what the CSV grants exists, bound to ServiceAccount
// ns/sa, the way OLM v0 grants it for an OperatorGroup of targets (nil: all
// namespaces): each clusterPermissions entry a ClusterRole with exactly its
// rules; each permissions entry a Role with exactly its rules in the
// operator's namespace and in each target namespace (OLM copies it there)
// or, for all namespaces, a ClusterRole with its rules plus get, list and
// watch on namespaces.
func (o *olmV0) checkRBACv0(csv *v1alpha1.ClusterServiceVersion, ns, sa string, targets []string) {
	o.t.Helper()
	// OLM may still be replacing an older CSV's roles and bindings when
	// the new CSV says Succeeded (seen once after an upgrade): wait for the
	// grants, failing with what is still missing.
	o.eventually("the CSV's permissions bound to "+ns+"/"+sa, func(ctx context.Context) (bool, string) {
		missing, err := o.missingRBACv0(ctx, csv, ns, sa, targets)
		if err != nil {
			return false, err.Error()
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
}

// missingRBACv0 is what checkRBACv0 waits for: each grant of csv that no
// role bound to ns/sa holds, in words.
func (o *olmV0) missingRBACv0(ctx context.Context, csv *v1alpha1.ClusterServiceVersion, ns, sa string, targets []string) ([]string, error) {
	clusterRules := func(name string) ([]rbacv1.PolicyRule, error) {
		r, err := suite.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	crbs, err := suite.kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var clusterBindings []roleBinding
	for _, b := range crbs.Items {
		clusterBindings = append(clusterBindings, roleBinding{b.Subjects, b.RoleRef, clusterRules})
	}
	roleBindings := func(n string) ([]roleBinding, error) {
		rbs, err := suite.kube.RbacV1().RoleBindings(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var out []roleBinding
		for _, b := range rbs.Items {
			rules := func(name string) ([]rbacv1.PolicyRule, error) {
				if b.RoleRef.Kind == "ClusterRole" {
					return clusterRules(name)
				}
				r, err := suite.kube.RbacV1().Roles(n).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return r.Rules, nil
			}
			out = append(out, roleBinding{b.Subjects, b.RoleRef, rules})
		}
		return out, nil
	}
	var missing []string
	spec := csv.Spec.InstallStrategy.StrategySpec
	for i, p := range spec.ClusterPermissions {
		if !boundV0(p.Rules, ns, sa, clusterBindings) {
			missing = append(missing, fmt.Sprintf("no ClusterRole with the rules of the CSV's clusterPermissions[%d] (%d rules) is bound to %s/%s", i, len(p.Rules), ns, sa))
		}
	}
	namespaces := append([]string{ns}, slices.DeleteFunc(slices.Clone(targets), func(n string) bool { return n == ns })...)
	for i, p := range spec.Permissions {
		if targets == nil {
			rules := append(slices.Clone(p.Rules), rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"namespaces"}})
			if !boundV0(rules, ns, sa, clusterBindings) {
				missing = append(missing, fmt.Sprintf("no ClusterRole with the rules of the CSV's permissions[%d] (%d rules, plus namespaces) is bound to %s/%s (AllNamespaces)", i, len(p.Rules), ns, sa))
			}
			continue
		}
		for _, n := range namespaces {
			bindings, err := roleBindings(n)
			if err != nil {
				return nil, err
			}
			if !boundV0(p.Rules, ns, sa, bindings) {
				missing = append(missing, fmt.Sprintf("no Role of %s with the rules of the CSV's permissions[%d] (%d rules) is bound to %s/%s", n, i, len(p.Rules), ns, sa))
			}
		}
	}
	return missing, nil
}

// roleBinding is a RoleBinding or ClusterRoleBinding, with how to read the
// rules of its role.
type roleBinding struct {
	subjects []rbacv1.Subject
	ref      rbacv1.RoleRef
	rules    func(name string) ([]rbacv1.PolicyRule, error)
}

// boundV0 reports whether one of bindings binds ns/sa to a role whose rules
// are want (in any order).
func boundV0(want []rbacv1.PolicyRule, ns, sa string, bindings []roleBinding) bool {
	for _, b := range bindings {
		if !slices.ContainsFunc(b.subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns
		}) {
			continue
		}
		got, err := b.rules(b.ref.Name)
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
