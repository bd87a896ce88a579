package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func scaled() DriftedObject {
	at := metav1.NewTime(time.Date(2026, 12, 6, 14, 1, 2, 0, time.UTC))
	return DriftedObject{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web",
		Fields: []DriftedField{{Path: "/spec/replicas", Manager: "kubectl", Operation: "Update", Subresource: "scale", Time: &at}}}
}

// reapplied is the outcome of a settled reconcile whose re-apply found drift.
func reapplied(found *DriftFound, why string) Outcome {
	return Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
		Action: ActionReconcile, ActionSucceeded: true, DriftChecked: true, Drift: found, DriftWhy: why}
}

func TestComputeDrifted(t *testing.T) {
	later := metav1.NewTime(now.Add(time.Minute))
	many := make([]DriftedObject, 12)
	for i := range many {
		many[i] = DriftedObject{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("c%d", i)}
		for j := 0; j < 12; j++ {
			many[i].Fields = append(many[i].Fields, DriftedField{Path: fmt.Sprintf("/data/k%d", j)})
		}
	}
	tests := []struct {
		name  string
		prev  func() Status
		out   func() Outcome
		want  string // "Status/Reason", "" for no condition
		check func(t *testing.T, s Status)
	}{{
		name: "no drift ever: no condition",
		prev: installed,
		out:  func() Outcome { return reapplied(nil, "") },
		want: "",
		check: func(t *testing.T, s Status) {
			if s.Drift != nil {
				t.Errorf("drift %+v", s.Drift)
			}
		},
	}, {
		name: "corrected: False DriftCorrected naming path, manager, subresource and time",
		prev: installed,
		out:  func() Outcome { return reapplied(&DriftFound{Objects: []DriftedObject{scaled()}, Corrected: true}, "") },
		want: "False/DriftCorrected",
		check: func(t *testing.T, s Status) {
			c := meta.FindStatusCondition(s.Conditions, TypeDrifted)
			if wantMsg := "Deployment web: /spec/replicas changed by kubectl (Update, scale) at 2026-12-06T14:01:02Z; corrected"; c.Message != wantMsg {
				t.Errorf("message %q, want %q", c.Message, wantMsg)
			}
			if d := s.Drift; d == nil || !d.Corrected || !d.DetectedAt.Equal(&now) || len(d.Objects) != 1 || d.Objects[0].Fields[0].Manager != "kubectl" {
				t.Errorf("drift %+v", d)
			}
			if r := meta.FindStatusCondition(s.Conditions, TypeReady); r.Status != metav1.ConditionTrue {
				t.Errorf("Ready %s: drift must not change it", r.Status)
			}
		},
	}, {
		name: "warn mode: True DriftDetected saying why it stands",
		prev: installed,
		out: func() Outcome {
			return reapplied(&DriftFound{Objects: []DriftedObject{scaled()}}, "the watch's drift mode is warn")
		},
		want: "True/DriftDetected",
		check: func(t *testing.T, s Status) {
			c := meta.FindStatusCondition(s.Conditions, TypeDrifted)
			if !strings.HasSuffix(c.Message, "; not corrected (the watch's drift mode is warn)") || s.Drift.Corrected {
				t.Errorf("message %q drift %+v", c.Message, s.Drift)
			}
			if r := meta.FindStatusCondition(s.Conditions, TypeReady); r.Status != metav1.ConditionTrue {
				t.Errorf("Ready %s: drift must not change it", r.Status)
			}
		},
	}, {
		name: "the same drift found again keeps detectedAt",
		prev: func() Status {
			return Compute(installed(), reapplied(&DriftFound{Objects: []DriftedObject{scaled()}}, "warn"))
		},
		out: func() Outcome {
			o := reapplied(&DriftFound{Objects: []DriftedObject{scaled()}}, "warn")
			o.Now = later
			return o
		},
		want: "True/DriftDetected",
		check: func(t *testing.T, s Status) {
			if !s.Drift.DetectedAt.Equal(&now) {
				t.Errorf("detectedAt %v, want the first %v", s.Drift.DetectedAt, now)
			}
		},
	}, {
		name: "drift gone by itself after warn: False DriftResolved, no report",
		prev: func() Status {
			return Compute(installed(), reapplied(&DriftFound{Objects: []DriftedObject{scaled()}}, "warn"))
		},
		out:  func() Outcome { return reapplied(nil, "") },
		want: "False/DriftResolved",
		check: func(t *testing.T, s Status) {
			if s.Drift != nil {
				t.Errorf("drift %+v", s.Drift)
			}
		},
	}, {
		name: "no drift after a correction: the last report stands",
		prev: func() Status {
			return Compute(installed(), reapplied(&DriftFound{Objects: []DriftedObject{scaled()}, Corrected: true}, ""))
		},
		out:  func() Outcome { return reapplied(nil, "") },
		want: "False/DriftCorrected",
		check: func(t *testing.T, s Status) {
			if s.Drift == nil || !s.Drift.Corrected {
				t.Errorf("drift %+v", s.Drift)
			}
		},
	}, {
		name: "a new revision clears the report",
		prev: func() Status {
			return Compute(installed(), reapplied(&DriftFound{Objects: []DriftedObject{scaled()}, Corrected: true}, ""))
		},
		out: func() Outcome {
			return Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(2),
				DeployedBy: ActionUpgrade, Action: ActionUpgrade}
		},
		want: "",
		check: func(t *testing.T, s Status) {
			if s.Drift != nil {
				t.Errorf("drift %+v", s.Drift)
			}
		},
	}, {
		name: "drift mode off removes the condition",
		prev: func() Status {
			return Compute(installed(), reapplied(&DriftFound{Objects: []DriftedObject{scaled()}}, "warn"))
		},
		out: func() Outcome {
			o := reapplied(nil, "")
			o.DriftChecked, o.DriftOff = false, true
			return o
		},
		want: "",
	}, {
		name: "a deleted object is named without a writer",
		prev: installed,
		out: func() Outcome {
			return reapplied(&DriftFound{Objects: []DriftedObject{{APIVersion: "v1", Kind: "ConfigMap", Name: "web", Deleted: true}}, Corrected: true}, "")
		},
		want: "False/DriftCorrected",
		check: func(t *testing.T, s Status) {
			if c := meta.FindStatusCondition(s.Conditions, TypeDrifted); c.Message != "ConfigMap web: deleted; corrected" {
				t.Errorf("message %q", c.Message)
			}
		},
	}, {
		name: "bounded: 10 objects of 10 fields, the rest counted",
		prev: installed,
		out:  func() Outcome { return reapplied(&DriftFound{Objects: many, Corrected: true}, "") },
		want: "False/DriftCorrected",
		check: func(t *testing.T, s Status) {
			d := s.Drift
			if len(d.Objects) != MaxDriftObjects || d.MoreObjects != 2 {
				t.Fatalf("%d objects, %d more", len(d.Objects), d.MoreObjects)
			}
			for _, o := range d.Objects {
				if len(o.Fields) != MaxDriftFields || o.MoreFields != 2 {
					t.Errorf("%s: %d fields, %d more", o.Name, len(o.Fields), o.MoreFields)
				}
			}
			if len(many[0].Fields) != 12 {
				t.Errorf("the outcome's fields were changed")
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.prev(), tt.out())
			c := meta.FindStatusCondition(s.Conditions, TypeDrifted)
			got := ""
			if c != nil {
				got = string(c.Status) + "/" + c.Reason
			}
			if got != tt.want {
				t.Fatalf("Drifted = %q (%v), want %q", got, c, tt.want)
			}
			checkConditions(t, s, want{})
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func TestNewDrift(t *testing.T) {
	warned := Compute(installed(), reapplied(&DriftFound{Objects: []DriftedObject{scaled()}}, "warn"))
	if NewDrift(warned, &DriftFound{Objects: []DriftedObject{scaled()}}) {
		t.Error("the drift the status reports is taken for new")
	}
	other := scaled()
	other.Fields[0].Path = "/spec/paused"
	if !NewDrift(warned, &DriftFound{Objects: []DriftedObject{other}}) {
		t.Error("drift on another path is not taken for new")
	}
	if !NewDrift(installed(), &DriftFound{Objects: []DriftedObject{scaled()}}) || NewDrift(warned, nil) {
		t.Error("NewDrift wrong on no previous drift or no drift")
	}
}
