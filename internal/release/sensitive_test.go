package release

import (
	"reflect"
	"testing"
)

func TestSensitivePathsAndValues(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{
		"storageClass":{"type":"string"},
		"db":{"type":"object","properties":{"host":{"type":"string"},"password":{"type":"string","format":"password"}}},
		"tokens":{"type":"array","items":{"type":"string","writeOnly":true}},
		"extra":{"type":"object","additionalProperties":{"type":"object","properties":{"key":{"writeOnly":true}}}},
		"either":{"anyOf":[{"type":"object","properties":{"pin":{"format":"password"}}}]}}}`)
	paths := SensitivePaths(schema, []string{"tls.key", ".api.token."})
	want := []string{"api.token", "db.password", "either.pin", "extra.*.key", "tls.key", "tokens.*"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths = %v, want %v", paths, want)
	}
	vals := map[string]any{
		"storageClass": "fast-ssd",
		"db":           map[string]any{"host": "db.example", "password": "hunter22"},
		"tokens":       []any{"t-one", "t-two"},
		"extra":        map[string]any{"a": map[string]any{"key": "k-a", "name": "shown"}},
		"tls":          map[string]any{"key": map[string]any{"pem": "-----BEGIN"}},
	}
	got := SensitiveValues(vals, paths)
	wantVals := []any{"hunter22", "k-a", map[string]any{"pem": "-----BEGIN"}, "t-one", "t-two"}
	if !reflect.DeepEqual(got, wantVals) {
		t.Errorf("values = %#v, want %#v", got, wantVals)
	}
	if got := SensitivePaths([]byte("{not json"), nil); len(got) != 0 {
		t.Errorf("a broken schema marks %v", got)
	}
}
