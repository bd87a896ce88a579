// Package boxcutter is a stand-in: see go.mod.
package boxcutter

import (
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkg.package-operator.run/boxcutter/machinery/types"
	"pkg.package-operator.run/boxcutter/ownerhandling"
)

// Phase is a set of objects lifecycled together.
type Phase = types.Phase

// RevisionReconcileOption changes a revision's reconciliation.
type RevisionReconcileOption = types.RevisionReconcileOption

// ProgressProbeType names the probe that guards phase progression.
const ProgressProbeType = types.ProgressProbeType

// RevisionBuilder is a revision built from phases.
type RevisionBuilder interface {
	types.Revision
}

type phase struct {
	name    string
	objects []client.Object
}

func (p phase) GetName() string             { return p.name }
func (p phase) GetObjects() []client.Object { return p.objects }

// NewPhase returns a phase of objects.
func NewPhase(name string, objects []client.Object) Phase { return phase{name: name, objects: objects} }

type revision struct {
	name   string
	number int64
	phases []Phase
}

func (r revision) GetName() string          { return r.name }
func (r revision) GetRevisionNumber() int64 { return r.number }
func (r revision) GetPhases() []Phase       { return r.phases }

// NewRevisionWithOwner returns a revision of phases.
func NewRevisionWithOwner(name string, number int64, phases []Phase, _ client.Object, _ ownerhandling.OwnerStrategy) RevisionBuilder {
	return revision{name: name, number: number, phases: phases}
}

type option struct{}

func (option) ApplyToRevisionReconcileOptions() {}
func (option) ApplyToObjectReconcileOptions()   {}

// WithSiblingOwners is an option the stand-in ignores.
func WithSiblingOwners([]client.Object) RevisionReconcileOption { return option{} }

// WithProbe is an option the stand-in ignores.
func WithProbe(string, types.Prober) RevisionReconcileOption { return option{} }

// WithAggregatePhaseReconcileErrors is an option the stand-in ignores.
func WithAggregatePhaseReconcileErrors() RevisionReconcileOption { return option{} }

// WithObjectReconcileOptions is an option the stand-in ignores.
func WithObjectReconcileOptions(client.Object, ...types.ObjectReconcileOption) RevisionReconcileOption {
	return option{}
}

// WithCollisionProtection is an option the stand-in ignores.
func WithCollisionProtection[T ~string](T) types.ObjectReconcileOption { return option{} }

var _ = runtime.NewScheme
