package release

import (
	"strings"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Drift modes of a watch (watches.yaml drift.mode).
const (
	// DriftCorrect: a re-apply restores what drifted (the default).
	DriftCorrect = "correct"
	// DriftWarn: a re-apply reports what drifted (Drifted=True, a
	// DriftDetected event) and writes nothing.
	DriftWarn = "warn"
	// DriftOff: a re-apply reads and compares nothing.
	DriftOff = "off"
)

// DriftPolicy is what a kind's re-applies do with drift (watches.yaml
// drift): its mode and the differences it ignores.
type DriftPolicy struct {
	// Mode is DriftCorrect, DriftWarn or DriftOff; "" means DriftCorrect.
	Mode string
	// Ignore lists the differences that are neither corrected nor reported.
	Ignore []DriftIgnore
}

// DriftIgnore is one rule of differences to leave alone. A field matches
// when every part the rule sets matches: one of Paths is the field's path
// or a parent of it, Manager and Subresource are those of the
// managedFields entry that owns it, Target names its object. A rule sets
// Paths or Manager, or both.
type DriftIgnore struct {
	// Paths are JSON pointers (RFC 6901) into the object, list elements by
	// index.
	Paths       []string
	Manager     string
	Subresource string
	Target      DriftTarget
}

// DriftTarget narrows a rule to objects: each field set must match.
type DriftTarget struct {
	APIVersion, Kind, Name string
}

func (p DriftPolicy) mode() string {
	if p.Mode == "" {
		return DriftCorrect
	}
	return p.Mode
}

// ignores tells whether a rule of p matches field f of the object obj.
func (p DriftPolicy) ignores(obj status.DriftedObject, f status.DriftedField) bool {
	for _, r := range p.Ignore {
		if r.matches(obj, f) {
			return true
		}
	}
	return false
}

func (r DriftIgnore) matches(obj status.DriftedObject, f status.DriftedField) bool {
	t := r.Target
	switch {
	case t.APIVersion != "" && t.APIVersion != obj.APIVersion,
		t.Kind != "" && t.Kind != obj.Kind,
		t.Name != "" && t.Name != obj.Name,
		r.Manager != "" && r.Manager != f.Manager,
		r.Subresource != "" && r.Subresource != f.Subresource:
		return false
	}
	if len(r.Paths) == 0 {
		return true
	}
	for _, p := range r.Paths {
		if f.Path == p || strings.HasPrefix(f.Path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}
