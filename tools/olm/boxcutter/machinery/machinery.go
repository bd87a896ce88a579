// Package machinery is a stand-in: see the module's go.mod. Its revision
// engine reconciles nothing and says so.
package machinery

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkg.package-operator.run/boxcutter/machinery/types"
)

// ErrNotInThisBuild is what every engine of this stand-in returns.
var ErrNotInThisBuild = errors.New("the Boxcutter runtime is not part of this build of operator-controller (feature gate BoxcutterRuntime must stay off)")

// Action is what an object's reconciliation did.
type Action string

// ActionCollision: the object belongs to someone else.
const ActionCollision Action = "Collision"

// ObjectResult is one object's outcome.
type ObjectResult interface {
	Action() Action
	String() string
	ProbeResults() map[string]types.ProbeResult
	Object() client.Object
}

// PhaseResult is one phase's outcome.
type PhaseResult interface {
	GetValidationError() error
	GetObjects() []ObjectResult
	IsComplete() bool
}

// RevisionResult is a revision's outcome.
type RevisionResult interface {
	String() string
	GetValidationError() error
	GetPhases() []PhaseResult
	InTransition() bool
	IsComplete() bool
}

// RevisionTeardownResult is a revision teardown's outcome.
type RevisionTeardownResult interface {
	IsComplete() bool
}

// Comparator compares objects with their state on the cluster.
type Comparator struct{}

// NewComparator returns a Comparator.
func NewComparator(any, *runtime.Scheme, string) *Comparator { return &Comparator{} }

// ObjectEngine reconciles objects.
type ObjectEngine struct{}

// NewObjectEngine returns an ObjectEngine.
func NewObjectEngine(*runtime.Scheme, client.Reader, client.Writer, *Comparator, string, string, string, client.Writer) *ObjectEngine {
	return &ObjectEngine{}
}

// PhaseEngine reconciles phases.
type PhaseEngine struct{}

// NewPhaseEngine returns a PhaseEngine.
func NewPhaseEngine(*ObjectEngine, any) *PhaseEngine { return &PhaseEngine{} }

// RevisionEngine reconciles revisions.
type RevisionEngine struct{}

// NewRevisionEngine returns a RevisionEngine.
func NewRevisionEngine(*PhaseEngine, any, client.Writer) *RevisionEngine { return &RevisionEngine{} }

// Reconcile returns ErrNotInThisBuild.
func (*RevisionEngine) Reconcile(context.Context, types.Revision, ...types.RevisionReconcileOption) (RevisionResult, error) {
	return nil, ErrNotInThisBuild
}

// Teardown returns ErrNotInThisBuild.
func (*RevisionEngine) Teardown(context.Context, types.Revision, ...types.RevisionTeardownOption) (RevisionTeardownResult, error) {
	return nil, ErrNotInThisBuild
}
