package chartrbac

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// clusterRoleFile is config/rbac/cluster_role.yaml as WriteRules creates it.
const clusterRoleFile = `# manager-cluster-role: what the operator may do cluster-wide for the charts
# that need it: their cluster-scoped kinds (ClusterRoles, CRDs, webhook
# configurations, CSIDrivers, ...), their namespaced kinds in namespaces
# other than a release's own, the CRDs of their crds/, and the rules of the
# ClusterRoles they create. Every rule is written by ` + "`make chart`" + `
# (internal/tooling/chartrbac) between a kind's markers, with the templates
# that need it; with no such chart it has no rules and grants nothing.
#
# Bound by cluster_role_binding.yaml, which the bundle keeps (unlike the
# cluster-wide binding of manager-role, config/manifests): its rules become
# the CSV's clusterPermissions, which OLM grants cluster-wide whatever the
# install mode; an entry with no rules is left out of the CSV.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: helm-app-operator
    app.kubernetes.io/managed-by: kustomize
  name: manager-cluster-role
rules:
` + scaffoldMarker + "\n"

// clusterRoleBindingFile is config/rbac/cluster_role_binding.yaml.
const clusterRoleBindingFile = `# Grants manager-cluster-role to the operator cluster-wide, for ` + "`make deploy`" + `
# and for the OLM bundle alike: the bundle generator turns the rules of a
# role bound by a ClusterRoleBinding into the CSV's clusterPermissions, so
# config/manifests keeps this binding (it deletes only manager-role's).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  labels:
    app.kubernetes.io/name: helm-app-operator
    app.kubernetes.io/managed-by: kustomize
  name: manager-cluster-rolebinding
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: manager-cluster-role
subjects:
- kind: ServiceAccount
  name: controller-manager
  namespace: system
`

// ensureClusterRole creates config/rbac/cluster_role.yaml and its binding
// when missing, and lists both in config/rbac/kustomization.yaml.
func ensureClusterRole(root string) error {
	for _, f := range []struct{ path, text string }{{ClusterRolePath, clusterRoleFile}, {ClusterRoleBindingPath, clusterRoleBindingFile}} {
		p := filepath.Join(root, f.path)
		if _, err := os.Stat(p); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(p, []byte(f.text), 0o644); err != nil {
			return err
		}
	}
	p := filepath.Join(root, rbacKustomizationPath)
	raw, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(raw), "\n")
	var missing []string
	for _, name := range []string{filepath.Base(ClusterRolePath), filepath.Base(ClusterRoleBindingPath)} {
		if !strings.Contains(string(raw), "- "+name+"\n") {
			missing = append(missing, "- "+name+"\n")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "- role_binding.yaml" {
			at = i + 1
		}
	}
	if at < 0 {
		return fmt.Errorf("%s lists no role_binding.yaml to put %s after", p, strings.Join(missing, ", "))
	}
	out := append(append(append([]string{}, lines[:at]...), missing...), lines[at:]...)
	return os.WriteFile(p, []byte(strings.Join(out, "")), 0o644)
}
