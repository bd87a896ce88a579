// Package chartrbac finds what a chart needs of the operator (the kinds it
// creates, the rules and the scope) and writes the RBAC files.
//
// STAND-IN: this file only declares the API of design39.md so that
// internal/tooling/chartkit compiles before the real package lands; it
// discovers nothing and writes nothing. The lead replaces it at merge.
package chartrbac

import (
	"helm.sh/helm/v3/pkg/chart"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// Needs is what one chart needs of the operator.
type Needs struct {
	Namespaced []rbacv1.PolicyRule // rules in the release's namespace (manager-role)
	Cluster    []rbacv1.PolicyRule // cluster-wide rules (manager-cluster-role)
	Scope      watches.Scope       // what its releases create beyond their own namespace (watches.yaml scope)
	Kinds      []Kind              // every kind found, with its resource, scope and where it was found
	Unresolved []string            // kinds it could not map to a resource, one line each
	Notes      []string            // what the author must check, one line each
}

// Kind is one kind a chart creates (stand-in shape).
type Kind struct {
	Group, Version, Kind string
	Resource             string
	Namespaced           bool
	Found                string
}

// CR names the custom resource whose chart it is.
type CR struct {
	Group, Version, Kind, Plural string
	Chart                        string /* helm-charts/<name> */
}

// Discover is a stand-in: it finds nothing.
func Discover(ch *chart.Chart) (*Needs, error) { return &Needs{}, nil }

// WriteRules is a stand-in: it writes nothing.
func WriteRules(root string, cr CR, n *Needs) error { return nil }

// RemoveRules is a stand-in: it removes nothing.
func RemoveRules(root, kind string) error { return nil }
