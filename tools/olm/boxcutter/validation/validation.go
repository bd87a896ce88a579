// Package validation is a stand-in: see the module's go.mod.
package validation

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterPhaseValidator validates phases.
type ClusterPhaseValidator struct{}

// NewClusterPhaseValidator returns a ClusterPhaseValidator.
func NewClusterPhaseValidator(meta.RESTMapper, client.Writer) *ClusterPhaseValidator {
	return &ClusterPhaseValidator{}
}

// RevisionValidator validates revisions.
type RevisionValidator struct{}

// NewRevisionValidator returns a RevisionValidator.
func NewRevisionValidator() *RevisionValidator { return &RevisionValidator{} }
