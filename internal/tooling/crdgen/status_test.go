package crdgen

import (
	"testing"
)

func TestStatusSchema(t *testing.T) {
	s := StatusSchema()
	if s.XPreserveUnknownFields == nil || !*s.XPreserveUnknownFields {
		t.Error("status does not preserve unknown fields")
	}
	wantFields := map[string]string{ // field → type/format
		"observedGeneration":      "integer/int64",
		"lastAttemptedGeneration": "integer/int64",
		"failures":                "integer/int64",
		"lastHandledRetry":        "string/",
		"conditions":              "array/",
		"deployedRelease":         "object/",
		"failedRelease":           "object/",
		"resources":               "object/",
		"phase":                   "string/",
		"lastTestRun":             "object/",
		"lastHandledTest":         "string/",
		"drift":                   "object/",
		"valuesSources":           "array/",
		"history":                 "array/",
	}
	for name, want := range wantFields {
		p, ok := s.Properties[name]
		if !ok {
			t.Errorf("status.%s missing", name)
			continue
		}
		if got := p.Type + "/" + p.Format; got != want {
			t.Errorf("status.%s is %s, want %s", name, got, want)
		}
	}
	if len(s.Properties) != len(wantFields) {
		t.Errorf("status has %d fields, want %d", len(s.Properties), len(wantFields))
	}

	conds := s.Properties["conditions"]
	if conds.XListType == nil || *conds.XListType != "map" || len(conds.XListMapKeys) != 1 || conds.XListMapKeys[0] != "type" {
		t.Errorf("conditions list type = %v keys %v", conds.XListType, conds.XListMapKeys)
	}
	for _, f := range []string{"lastTransitionTime"} {
		if p := conds.Items.Schema.Properties[f]; p.Format != "date-time" {
			t.Errorf("conditions[].%s format = %q", f, p.Format)
		}
	}
	dr := s.Properties["deployedRelease"].Properties
	for _, f := range []string{"firstDeployed", "lastDeployed"} {
		if dr[f].Format != "date-time" {
			t.Errorf("deployedRelease.%s format = %q", f, dr[f].Format)
		}
	}
	if dr["revision"].Type != "integer" || len(dr) != 11 {
		t.Errorf("deployedRelease = %v fields", len(dr))
	}
	fr := s.Properties["failedRelease"].Properties
	if len(fr["action"].Enum) != 4 || fr["time"].Format != "date-time" || fr["revision"].Type != "integer" {
		t.Errorf("failedRelease = %+v", fr)
	}
	tr := s.Properties["lastTestRun"].Properties
	hook := tr["hooks"].Items.Schema.Properties
	if tr["startedAt"].Format != "date-time" || tr["completedAt"].Format != "date-time" || tr["revision"].Type != "integer" ||
		hook["startedAt"].Format != "date-time" || hook["completedAt"].Format != "date-time" || hook["name"].Type != "string" || hook["phase"].Type != "string" {
		t.Errorf("lastTestRun = %+v, hooks %+v", tr, hook)
	}
	drift := s.Properties["drift"].Properties
	objs := drift["objects"]
	fields := objs.Items.Schema.Properties["fields"]
	if objs.MaxItems == nil || *objs.MaxItems != 10 || fields.MaxItems == nil || *fields.MaxItems != 10 ||
		drift["detectedAt"].Format != "date-time" || fields.Items.Schema.Properties["time"].Format != "date-time" ||
		len(fields.Items.Schema.Properties) != 6 {
		t.Errorf("drift = %+v", drift)
	}
	nr := s.Properties["resources"].Properties["notReady"]
	if nr.MaxItems == nil || *nr.MaxItems != 10 || len(nr.Items.Schema.Properties) != 6 {
		t.Errorf("resources.notReady = %+v", nr)
	}
	// Reported, not counted (issue 40): bounded like notReady.
	w := s.Properties["resources"].Properties["warnings"]
	if w.MaxItems == nil || *w.MaxItems != 10 || len(w.Items.Schema.Properties) != 6 {
		t.Errorf("resources.warnings = %+v", w)
	}
}
