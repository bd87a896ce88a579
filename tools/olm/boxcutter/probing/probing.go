// Package probing is a stand-in: see the module's go.mod. Every probe of it
// answers Unknown.
package probing

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"pkg.package-operator.run/boxcutter/machinery/types"
)

// Prober evaluates an object.
type Prober = types.Prober

var unknown = types.ProbeResult{Status: types.ProbeStatusUnknown, Messages: []string{"probes are not part of this build"}}

// And is every probe of it.
type And []Prober

// Probe implements Prober.
func (And) Probe(client.Object) types.ProbeResult { return unknown }

// ConditionProbe checks a condition.
type ConditionProbe struct {
	Type   string
	Status string
}

// Probe implements Prober.
func (*ConditionProbe) Probe(client.Object) types.ProbeResult { return unknown }

// FieldsEqualProbe checks that two fields are equal.
type FieldsEqualProbe struct {
	FieldA string
	FieldB string
}

// Probe implements Prober.
func (*FieldsEqualProbe) Probe(client.Object) types.ProbeResult { return unknown }

// FieldValueProbe checks a field's value.
type FieldValueProbe struct {
	FieldPath string
	Value     string
}

// Probe implements Prober.
func (*FieldValueProbe) Probe(client.Object) types.ProbeResult { return unknown }

// GroupKindSelector probes objects of one GroupKind.
type GroupKindSelector struct {
	schema.GroupKind
	Prober
}

// Probe implements Prober.
func (*GroupKindSelector) Probe(client.Object) types.ProbeResult { return unknown }

// LabelSelector probes objects matching a selector.
type LabelSelector struct {
	labels.Selector
	Prober
}

// Probe implements Prober.
func (*LabelSelector) Probe(client.Object) types.ProbeResult { return unknown }

// ObservedGenerationProbe probes objects whose status is current.
type ObservedGenerationProbe struct {
	Prober
}

// Probe implements Prober.
func (*ObservedGenerationProbe) Probe(client.Object) types.ProbeResult { return unknown }
