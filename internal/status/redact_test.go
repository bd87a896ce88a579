package status

import (
	"encoding/base64"
	"strings"
	"testing"
)

// Each form a value of the spec can take in an error from Helm or the API
// server is hidden (docs/status.md, "Redaction").
func TestRedactorForms(t *testing.T) {
	r := NewRedactor(map[string]any{
		"replicas": int64(7),
		"ratio":    0.25,
		"debug":    true,
		"user":     "bob",
		"token":    "hunter2-s3cret",
		"nested":   map[string]any{"list": []any{"x9k"}},
		"name":     "web-frontend",
	}, "web-frontend")
	tests := []struct{ name, msg, want string }{
		{"number quoted by Helm",
			`template: web/templates/d.yaml:3: wrong type "7" for replicas`,
			`template: web/templates/d.yaml:3: wrong type "[redacted]" for replicas`},
		{"float quoted",
			`cannot use '0.25' here`,
			`cannot use '[redacted]' here`},
		{"boolean quoted",
			`value "true" is not allowed`,
			`value "[redacted]" is not allowed`},
		{"short string quoted",
			`user "bob" unknown; escaped \"bob\" too`,
			`user "[redacted]" unknown; escaped \"[redacted]\" too`},
		{"short string in a list quoted",
			`key "x9k" rejected`,
			`key "[redacted]" rejected`},
		{"long string anywhere",
			`data hunter2-s3cret leaked`,
			`data [redacted] leaked`},
		{"base64 of a long string",
			`secret data ` + base64.StdEncoding.EncodeToString([]byte("hunter2-s3cret")) + ` invalid`,
			`secret data [redacted] invalid`},
		{"base64 of a short string",
			`data: ` + base64.StdEncoding.EncodeToString([]byte("bob")) + ` and ` + base64.RawURLEncoding.EncodeToString([]byte("x9k")),
			`data: [redacted] and [redacted]`},
		{"API field error: number",
			`Deployment.apps "web-frontend" is invalid: spec.replicas: Invalid value: 7: must be less than 5`,
			`Deployment.apps "web-frontend" is invalid: spec.replicas: Invalid value: [redacted]: must be less than 5`},
		{"API field error: a value not in the spec (a template's output)",
			`spec.template.spec.containers[0].image: Invalid value: "reg/x:1": must not contain ..., metadata.labels: Invalid value: "a b": name part must consist`,
			`spec.template.spec.containers[0].image: Invalid value: [redacted]: must not contain ..., metadata.labels: Invalid value: [redacted]: name part must consist`},
		{"API field error: boolean, object, unsupported value",
			`spec.a: Invalid value: false: x, spec.b: Invalid value: {"k":"v: w"}: y, spec.c: Unsupported value: "Sometimes": supported values: "Always", "Never"`,
			`spec.a: Invalid value: [redacted]: x, spec.b: Invalid value: [redacted]: y, spec.c: Unsupported value: [redacted]: supported values: "Always", "Never"`},
		{"API field error nested in an escaped message",
			`error: \"spec.a: Invalid value: \"ab\": bad\"`,
			`error: \"spec.a: Invalid value: [redacted]: bad\"`},
		{"kept names and unquoted short words stay",
			`Upgrade of release web-frontend to revision 7 failed: 7 objects, bob`,
			`Upgrade of release web-frontend to revision 7 failed: 7 objects, bob`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.msg); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.msg, got, tt.want)
			}
		})
	}
	if got := r.Redact("a clean message"); strings.Contains(got, RedactedMark) {
		t.Errorf("a message without values was changed: %q", got)
	}
}

// RedactMessage redacts values only: the text the operator did not write
// (marked Foreign), never the operator's own words around it — its advice,
// enum words such as "true" and "false", reason and field names — even when a
// value of the spec is one of those words.
func TestRedactMessageKeepsTheOperatorsWords(t *testing.T) {
	r := NewRedactor(map[string]any{"spec": map[string]any{
		"enabled": true, "debug": false, "mode": "replicas", "tier": "UpgradeError", "token": "hunter2-s3cret",
	}})
	tests := []struct{ name, msg, want string }{
		{"annotation advice with booleans in the spec",
			`The annotation helm.sdk.operatorframework.io/upgrade-force has the value "maybe", which is not a boolean: set it to "true" or "false", or remove it`,
			`The annotation helm.sdk.operatorframework.io/upgrade-force has the value "maybe", which is not a boolean: set it to "true" or "false", or remove it`},
		{"the operator's words kept, the error quoting values redacted",
			`Upgrade of release web to revision 3 failed: ` + Foreign(`value "true" for "replicas" rejected: token hunter2-s3cret`),
			`Upgrade of release web to revision 3 failed: value "[redacted]" for "[redacted]" rejected: token [redacted]`},
		{"a reason name and a field name in the operator's words",
			`Release web is "UpgradeError" in field "replicas": ` + Foreign(`got "UpgradeError"`),
			`Release web is "UpgradeError" in field "replicas": got "[redacted]"`},
		{"a remedy quoting an error",
			`Upgrade failed: ` + Foreign(`"false" denied`) + `; rolling back to revision 2 failed: ` + Foreign(`Invalid value: "x"`),
			`Upgrade failed: "[redacted]" denied; rolling back to revision 2 failed: Invalid value: [redacted]`},
		{"a mark left open by truncation runs to the end",
			`Install failed: ` + Foreign(`"true" is bad`)[:len(Foreign(`"true" is bad`))-len(foreignClose)] + "…",
			`Install failed: "[redacted]" is bad…`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.RedactMessage(tt.msg); got != tt.want {
				t.Errorf("RedactMessage(%q)\n got %q\nwant %q", tt.msg, got, tt.want)
			}
		})
	}
	// Redact, for text that is all foreign, still hides the quoted boolean.
	if got := r.Redact(`set it to "true"`); got != `set it to "[redacted]"` {
		t.Errorf("Redact of foreign text: %q", got)
	}
	if got := Plain("a " + Foreign("b") + " c"); got != "a b c" {
		t.Errorf("Plain: %q", got)
	}
}
