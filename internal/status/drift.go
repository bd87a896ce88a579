package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of status.drift: at most MaxDriftObjects objects, MaxDriftFields
// fields each; the rest are counted (moreObjects, moreFields).
const (
	MaxDriftObjects = 10
	MaxDriftFields  = 10
)

// Drift is status.drift: the drift the last re-apply found in the deployed
// release's objects. It holds paths and who last wrote them, never values.
type Drift struct {
	// DetectedAt is when this drift was first found (the same objects and
	// paths found again keep it).
	DetectedAt metav1.Time `json:"detectedAt"`
	// Corrected is true once the operator restored the objects.
	Corrected bool `json:"corrected"`
	// Objects lists at most MaxDriftObjects drifted objects, in the
	// manifest's order; MoreObjects counts the rest.
	Objects     []DriftedObject `json:"objects,omitempty"`
	MoreObjects int             `json:"moreObjects,omitempty"`
}

// DriftedObject is one object of the release whose live state no longer
// held every field the manifest sets.
type DriftedObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Deleted: the object was gone. Nothing records who deleted it.
	Deleted bool `json:"deleted,omitempty"`
	// Fields lists at most MaxDriftFields of the paths that differed;
	// MoreFields counts the rest.
	Fields     []DriftedField `json:"fields,omitempty"`
	MoreFields int            `json:"moreFields,omitempty"`
}

// DriftedField is one field that differed from the manifest, with the
// writer the object's managedFields name as its owner before the
// correction. Manager is empty when no entry owns the path (the field was
// removed, or written by a client that records no manager).
type DriftedField struct {
	// Path is a JSON pointer (RFC 6901) into the object; list elements by
	// their index in the live object.
	Path string `json:"path"`
	// Manager, Operation (Update or Apply) and Subresource ("" for the
	// object itself, "scale", "status") of the managedFields entry that
	// owns Path.
	Manager     string `json:"manager,omitempty"`
	Operation   string `json:"operation,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	// Time is the entry's time: the manager's last write that changed any
	// of its fields, to the second. It is not necessarily the write of
	// this field. When the entry records no time (Kubernetes records none
	// for a write through the scale subresource), Time is when the
	// operator found the drift, and TimeObserved is true.
	Time         *metav1.Time `json:"time,omitempty"`
	TimeObserved bool         `json:"timeObserved,omitempty"`
}

// DriftFound is what one re-apply found: the objects that drifted, in the
// manifest's order, unbounded (Compute bounds them), and whether they were
// restored.
type DriftFound struct {
	Objects []DriftedObject
	// Corrected: every drifted object was restored.
	Corrected bool
}

// String names an object as messages do: "Deployment web", "ClusterRole x".
func (o DriftedObject) String() string {
	return o.Kind + " " + o.Name
}

// Describe says what changed in o and who changed it, on one line:
// "Deployment web: /spec/replicas changed by kubectl (Update, scale) at
// 2026-12-06T14:01:02Z".
func (o DriftedObject) Describe() string {
	if o.Deleted {
		return o.String() + ": deleted"
	}
	parts := make([]string, 0, len(o.Fields))
	for _, f := range o.Fields {
		parts = append(parts, f.describe())
	}
	s := o.String() + ": " + strings.Join(parts, ", ")
	if o.MoreFields > 0 {
		s += fmt.Sprintf(" and %d more fields", o.MoreFields)
	}
	return s
}

func (f DriftedField) describe() string {
	if f.Manager == "" {
		return f.Path + " changed (no writer recorded)"
	}
	how := f.Operation
	if f.Subresource != "" {
		how += ", " + f.Subresource
	}
	s := fmt.Sprintf("%s changed by %s (%s)", f.Path, f.Manager, how)
	switch {
	case f.Time != nil && f.TimeObserved:
		s += ", found at " + f.Time.UTC().Format("2006-01-02T15:04:05Z")
	case f.Time != nil:
		s += " at " + f.Time.UTC().Format("2006-01-02T15:04:05Z")
	}
	return s
}

// DescribeDrift says what drifted, bounded to the first objects: "Deployment
// web: /spec/replicas changed by kubectl (Update, scale) at ...; ConfigMap
// web: deleted".
func DescribeDrift(objs []DriftedObject, max int) string {
	parts := make([]string, 0, min(len(objs), max))
	for _, o := range objs[:min(len(objs), max)] {
		parts = append(parts, o.Describe())
	}
	s := strings.Join(parts, "; ")
	if more := len(objs) - max; more > 0 {
		s += fmt.Sprintf("; and %d more objects", more)
	}
	return s
}

// boundDrift keeps at most MaxDriftObjects objects of MaxDriftFields
// fields each, counting the rest.
func boundDrift(objs []DriftedObject) (kept []DriftedObject, more int) {
	for i, o := range objs {
		if i == MaxDriftObjects {
			return kept, len(objs) - i
		}
		o.Fields = append([]DriftedField(nil), o.Fields...)
		if n := len(o.Fields); n > MaxDriftFields {
			o.Fields, o.MoreFields = o.Fields[:MaxDriftFields], o.MoreFields+n-MaxDriftFields
		}
		kept = append(kept, o)
	}
	return kept, 0
}

// sameDrift tells whether a and b name the same objects and paths.
func sameDrift(a []DriftedObject, b []DriftedObject) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.APIVersion != y.APIVersion || x.Kind != y.Kind || x.Namespace != y.Namespace || x.Name != y.Name ||
			x.Deleted != y.Deleted || len(x.Fields) != len(y.Fields) || x.MoreFields != y.MoreFields {
			return false
		}
		for j := range x.Fields {
			if x.Fields[j].Path != y.Fields[j].Path {
				return false
			}
		}
	}
	return true
}

// NewDrift tells whether found is drift that prev does not already report
// uncorrected: a warn-mode drift found again on every reconcile is told
// (DriftDetected event) once.
func NewDrift(prev Status, found *DriftFound) bool {
	if found == nil || len(found.Objects) == 0 {
		return false
	}
	kept, more := boundDrift(found.Objects)
	d := prev.Drift
	return d == nil || d.Corrected != found.Corrected || d.MoreObjects != more || !sameDrift(d.Objects, kept)
}

// drifted sets the Drifted condition and status.drift from what this
// reconcile's re-apply found (o.DriftChecked, o.Drift): absent until the
// first drift; True DriftDetected while drift stands uncorrected; False
// DriftCorrected once the operator restored it; removed with status.drift
// when a new revision is deployed or drift checks are off. A re-apply that
// finds no drift turns a standing True into False (DriftResolved: someone
// put it back) and otherwise leaves the last report as it was.
func (c conditionSetter) drifted(prev Status, o Outcome) {
	switch {
	case o.DriftOff || o.DeployedBy != "" || c.s.DeployedRelease == nil:
		meta.RemoveStatusCondition(&c.s.Conditions, TypeDrifted)
		c.s.Drift = nil
	case !o.DriftChecked:
		// No re-apply compared the objects: the last report stands.
	case o.Drift == nil || len(o.Drift.Objects) == 0:
		if d := meta.FindStatusCondition(c.s.Conditions, TypeDrifted); d != nil && d.Status == metav1.ConditionTrue {
			c.set(TypeDrifted, metav1.ConditionFalse, ReasonDriftResolved,
				"The drift reported before is gone: every object holds its manifest's fields again")
			c.s.Drift = nil
		}
	default:
		kept, more := boundDrift(o.Drift.Objects)
		at := o.Now
		if p := prev.Drift; p != nil && p.Corrected == o.Drift.Corrected && sameDrift(p.Objects, kept) {
			at = p.DetectedAt
		}
		c.s.Drift = &Drift{DetectedAt: at, Corrected: o.Drift.Corrected, Objects: kept, MoreObjects: more}
		what := DescribeDrift(kept, 3)
		if o.Drift.Corrected {
			c.set(TypeDrifted, metav1.ConditionFalse, ReasonDriftCorrected, what+"; corrected")
		} else {
			c.set(TypeDrifted, metav1.ConditionTrue, ReasonDriftDetected, what+"; not corrected ("+o.DriftWhy+")")
		}
	}
}
