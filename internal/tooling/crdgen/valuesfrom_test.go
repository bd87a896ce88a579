package crdgen

import (
	"testing"
)

// valuesFrom is a top-level list beside spec whose entries the API server
// checks: a kind of two, a name.
func TestValuesFromSchema(t *testing.T) {
	s := ValuesFromSchema()
	if s.Type != "array" || s.MaxItems == nil || *s.MaxItems != MaxValuesFrom {
		t.Fatalf("valuesFrom = %s, maxItems %v", s.Type, s.MaxItems)
	}
	e := s.Items.Schema
	if len(e.Required) != 2 || e.Required[0] != "kind" || e.Required[1] != "name" {
		t.Errorf("required = %v", e.Required)
	}
	if k := e.Properties["kind"]; len(k.Enum) != 2 {
		t.Errorf("kind enum = %v", k.Enum)
	}
	for _, f := range []string{"valuesKey", "targetPath", "optional"} {
		if _, ok := e.Properties[f]; !ok {
			t.Errorf("valuesFrom[].%s missing", f)
		}
	}
}
