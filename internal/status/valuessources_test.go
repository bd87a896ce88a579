package status

import "testing"

// status.valuesSources follows the reconcile that read the references, is
// kept by one that did not, and goes with valuesFrom.
func TestComputeValuesSources(t *testing.T) {
	prev := Status{ValuesSources: []ValuesSource{{Kind: "Secret", Name: "db", ResourceVersion: "1", Found: true}}}
	if got := Compute(prev, Outcome{Generation: 1}).ValuesSources; len(got) != 1 {
		t.Errorf("a reconcile that read nothing dropped valuesSources: %v", got)
	}
	read := []ValuesSource{{Kind: "Secret", Name: "db", ResourceVersion: "2", Found: true}}
	if got := Compute(prev, Outcome{Generation: 1, SourcesRead: true, ValuesSources: read}).ValuesSources; len(got) != 1 || got[0].ResourceVersion != "2" {
		t.Errorf("valuesSources = %v, want the read one", got)
	}
	if got := Compute(prev, Outcome{Generation: 1, SourcesRead: true}).ValuesSources; got != nil {
		t.Errorf("valuesSources = %v after valuesFrom was removed, want none", got)
	}
}
