package chartkit

import (
	"fmt"
	"path/filepath"
	"strings"
)

// kindNames are the names of a kind the project's files use.
type kindNames struct {
	Group, Version, Kind string
	// Plural is the CRD's resource name (crdgen.Names).
	Plural string
	// Chart is the chart's path in the project, helm-charts/<name>.
	Chart string
}

func (k kindNames) lower() string { return strings.ToLower(k.Kind) }

// groupLabel is the group's first label ("web" of web.helmapp.io).
func (k kindNames) groupLabel() string {
	label, _, _ := strings.Cut(k.Group, ".")
	return label
}

// sampleFile is config/samples/<group label>_<version>_<kind>.yaml.
func (k kindNames) sampleFile() string {
	return fmt.Sprintf("%s_%s_%s.yaml", k.groupLabel(), k.Version, k.lower())
}

func (k kindNames) editorRoleFile() string { return k.lower() + "_editor_role.yaml" }
func (k kindNames) viewerRoleFile() string { return k.lower() + "_viewer_role.yaml" }

// crdFile is the CRD's file in config/crd/bases (crdgen.FileName).
func (k kindNames) crdFile() string { return k.Group + "_" + k.Plural + ".yaml" }

// sample is a minimal resource of the kind: an empty spec installs the
// chart with its default values.
func sample(k kindNames) []byte {
	return []byte(fmt.Sprintf(`apiVersion: %[1]s/%[2]s
kind: %[3]s
metadata:
  name: %[4]s-sample
# spec holds the values of the chart %[5]s: anything not set
# here keeps the chart's default (its values.yaml), so an empty spec installs
# the chart as it comes. This sample is also the OLM bundle's alm-examples
# entry: the console's Create form starts from it.
spec: {}
`, k.Group, k.Version, k.Kind, k.lower(), k.Chart))
}

// editorRole is the ClusterRole that lets a user manage the kind's resources
// (not bound to anyone).
func editorRole(k kindNames) []byte {
	return []byte(fmt.Sprintf(`# Permissions for end users to edit %[1]s. Not bound to
# anyone: an aid for cluster admins (in the OLM bundle, a separate manifest).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: helm-app-operator
    app.kubernetes.io/managed-by: kustomize
  name: %[2]s-editor-role
rules:
# Users with this role manage %[1]s: create, change and delete them (the
# operator then installs, upgrades or uninstalls their releases).
- apiGroups:
  - %[3]s
  resources:
  - %[1]s
  verbs:
  - create
  - delete
  - get
  - list
  - patch
  - update
  - watch
# ...and read their status: the release's conditions and revisions.
- apiGroups:
  - %[3]s
  resources:
  - %[1]s/status
  verbs:
  - get
`, k.Plural, k.lower(), k.Group))
}

// viewerRole is the ClusterRole that lets a user read the kind's resources
// (not bound to anyone).
func viewerRole(k kindNames) []byte {
	return []byte(fmt.Sprintf(`# Permissions for end users to view %[1]s. Not bound to
# anyone: an aid for cluster admins (in the OLM bundle, a separate manifest).
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: helm-app-operator
    app.kubernetes.io/managed-by: kustomize
  name: %[2]s-viewer-role
rules:
# Users with this role read %[1]s (kubectl get/describe, the console).
- apiGroups:
  - %[3]s
  resources:
  - %[1]s
  verbs:
  - get
  - list
  - watch
# ...and read their status: the release's conditions and revisions.
- apiGroups:
  - %[3]s
  resources:
  - %[1]s/status
  verbs:
  - get
`, k.Plural, k.lower(), k.Group))
}

// paths of a kind's own files, relative to the root.
func (k kindNames) samplePath() string {
	return filepath.Join("config", "samples", k.sampleFile())
}
func (k kindNames) editorRolePath() string {
	return filepath.Join("config", "rbac", k.editorRoleFile())
}
func (k kindNames) viewerRolePath() string {
	return filepath.Join("config", "rbac", k.viewerRoleFile())
}
