package bundle

import (
	"fmt"
	"sort"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// rbacSplit is what splitRBAC makes of the RBAC objects of the kustomize
// output.
type rbacSplit struct {
	// Permissions are the rules of the roles bound to a deployment's
	// ServiceAccount by RoleBindings (namespaced grants), ClusterPermissions
	// those bound by ClusterRoleBindings; one entry per ServiceAccount.
	Permissions, ClusterPermissions []v1alpha1.StrategyDeploymentPermissions
	// Consumed are the objects the CSV replaces and the bundle does not ship:
	// the ServiceAccounts, the roles bound only to them and their bindings.
	Consumed map[*unstructured.Unstructured]bool
}

// splitRBAC does what operator-sdk's `generate bundle` does with RBAC: for
// each ServiceAccount a Deployment runs as (in namespace ns), the rules of
// every Role or ClusterRole a RoleBinding binds to it become `permissions`,
// and those of every ClusterRole a ClusterRoleBinding binds to it become
// `clusterPermissions`. OLM creates the ServiceAccount and the bindings
// itself, so they are consumed; a role also bound to someone else is kept as
// a manifest. Rules keep their order within a role; roles are taken in name
// order; a ServiceAccount whose roles hold no rule gets no entry. A binding
// to a role that does not exist is an error.
func splitRBAC(objs []*unstructured.Unstructured, ns string, serviceAccounts []string) (rbacSplit, error) {
	out := rbacSplit{Consumed: map[*unstructured.Unstructured]bool{}}
	isSA := map[string]bool{}
	for _, sa := range serviceAccounts {
		isSA[sa] = true
	}
	roles := map[string]*unstructured.Unstructured{} // "Role/name" or "ClusterRole/name"
	boundToOthers := map[string]bool{}
	type grant struct{ sa, role string }
	var nsGrants, clusterGrants []grant

	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			if isSA[o.GetName()] {
				out.Consumed[o] = true
			}
		case "Role", "ClusterRole":
			roles[o.GetKind()+"/"+o.GetName()] = o
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.RoleBinding // same shape as ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				return out, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			roleKey := b.RoleRef.Kind + "/" + b.RoleRef.Name
			ours := 0
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && isSA[s.Name] && (s.Namespace == ns || s.Namespace == "") {
					ours++
					g := grant{sa: s.Name, role: roleKey}
					if o.GetKind() == "RoleBinding" {
						nsGrants = append(nsGrants, g)
					} else {
						clusterGrants = append(clusterGrants, g)
					}
				}
			}
			switch {
			case ours == 0:
				boundToOthers[roleKey] = true
			case ours == len(b.Subjects):
				out.Consumed[o] = true
			default:
				return out, fmt.Errorf("%s %s binds the operator's ServiceAccount together with other subjects; give them separate bindings", o.GetKind(), o.GetName())
			}
		}
	}

	collect := func(grants []grant) ([]v1alpha1.StrategyDeploymentPermissions, error) {
		bySA := map[string][]string{}
		for _, g := range grants {
			if roles[g.role] == nil {
				return nil, fmt.Errorf("the operator's ServiceAccount %s is bound to %s, which is not in config/", g.sa, g.role)
			}
			bySA[g.sa] = append(bySA[g.sa], g.role)
		}
		var perms []v1alpha1.StrategyDeploymentPermissions
		for _, sa := range serviceAccounts {
			keys := bySA[sa]
			if len(keys) == 0 {
				continue
			}
			sort.Strings(keys)
			p := v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa}
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					continue
				}
				seen[k] = true
				var r rbacv1.ClusterRole // Role has the same rules field
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(roles[k].Object, &r); err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
				p.Rules = append(p.Rules, r.Rules...)
				if !boundToOthers[k] {
					out.Consumed[roles[k]] = true
				}
			}
			// A role with no rules (manager-cluster-role while no chart
			// needs a cluster-wide rule) grants nothing: an entry without
			// rules would only be noise in the CSV.
			if len(p.Rules) > 0 {
				perms = append(perms, p)
			}
		}
		return perms, nil
	}
	var err error
	if out.Permissions, err = collect(nsGrants); err != nil {
		return out, err
	}
	if out.ClusterPermissions, err = collect(clusterGrants); err != nil {
		return out, err
	}
	return out, nil
}
