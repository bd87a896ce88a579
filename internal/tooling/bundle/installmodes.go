package bundle

import (
	"fmt"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// installModes narrows the base CSV's install modes to what the kinds'
// releases allow. A kind whose releases create a cluster-scoped object, or
// an object in a fixed other namespace (watches.yaml scope), whose name
// does not hold {{namespace}} shares that object with every other install
// of the operator: two installs for different namespaces (OwnNamespace,
// SingleNamespace, MultiNamespace) would both create it and fight over it
// (Helm refuses an object another release owns, or one overwrites the
// other), and the clusterPermissions that let them are cluster-wide
// anyway. Such an operator is offered AllNamespaces only: one install for
// the cluster, which is also the only mode OLM v1 installs. Names with
// {{namespace}} differ from one namespace to the next and leave the modes
// as they are.
func installModes(root string, base []v1alpha1.InstallMode) ([]v1alpha1.InstallMode, error) {
	entries, err := readWatches(root)
	if err != nil {
		return nil, err
	}
	var shared []string
	for _, e := range entries {
		if e.Scope == nil {
			continue
		}
		for _, r := range append(append([]watches.ScopeRule{}, e.Scope.ClusterScoped...), e.Scope.Namespaces...) {
			for _, n := range r.Names {
				if !strings.Contains(n, watches.NameNamespace) {
					shared = append(shared, fmt.Sprintf("%s %s %s", e.Kind, r.Kind, n))
					break
				}
			}
		}
	}
	if len(shared) == 0 {
		return base, nil
	}
	why := "the releases create objects every install would share (" + strings.Join(firstFew(shared, 3), ", ") + ")"
	out := make([]v1alpha1.InstallMode, 0, len(base))
	all := false
	for _, m := range base {
		if m.Type == v1alpha1.InstallModeTypeAllNamespaces {
			all = m.Supported
		} else {
			m.Supported = false
		}
		out = append(out, m)
	}
	if !all {
		return nil, fmt.Errorf("the base CSV does not support the AllNamespaces install mode, the only one left when %s", why)
	}
	return out, nil
}

// firstFew is the first n of s and how many more there are.
func firstFew(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}
