// Package types holds the stand-in's revision, phase, option and probe types.
package types

import "sigs.k8s.io/controller-runtime/pkg/client"

// Revision is a set of phases at one point in time.
type Revision interface {
	GetName() string
	GetRevisionNumber() int64
	GetPhases() []Phase
}

// Phase is a set of objects lifecycled together.
type Phase interface {
	GetName() string
	GetObjects() []client.Object
}

// RevisionReconcileOption changes a revision's reconciliation.
type RevisionReconcileOption interface{ ApplyToRevisionReconcileOptions() }

// RevisionTeardownOption changes a revision's teardown.
type RevisionTeardownOption interface{ ApplyToRevisionTeardownOptions() }

// ObjectReconcileOption changes an object's reconciliation.
type ObjectReconcileOption interface{ ApplyToObjectReconcileOptions() }

// ProbeStatus is the outcome of a probe.
type ProbeStatus string

// The outcomes of a probe.
const (
	ProbeStatusTrue    ProbeStatus = "True"
	ProbeStatusFalse   ProbeStatus = "False"
	ProbeStatusUnknown ProbeStatus = "Unknown"
)

// ProbeResult is a probe's outcome and its messages.
type ProbeResult struct {
	Status   ProbeStatus
	Messages []string
}

// Prober evaluates an object.
type Prober interface {
	Probe(obj client.Object) ProbeResult
}

// ProgressProbeType names the probe that guards phase progression.
const ProgressProbeType = "progress"
