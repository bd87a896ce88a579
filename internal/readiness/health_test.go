package readiness

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

func TestCompileRulesRefusesBadExpressions(t *testing.T) {
	tests := []struct {
		name      string
		check     HealthCheck
		wantField string
		wantErr   string
	}{
		{"syntax", HealthCheck{Current: "status.ready =="}, FieldCurrent, "1:16: Syntax error"},
		{"an undeclared variable", HealthCheck{Failed: "object.status.failed"}, FieldFailed, "undeclared reference to 'object'"},
		{"a string where a bool is needed", HealthCheck{Current: "true", InProgress: "'yes'"}, FieldInProgress, "the expression is of type string, want bool"},
		{"an int where a bool is needed", HealthCheck{Current: "size(status) + 1"}, FieldCurrent, "of type int, want bool"},
		{"a bool where the message is needed", HealthCheck{Current: "true", Message: "has(status.x)"}, FieldMessage, "of type bool, want string"},
		{"an unknown function", HealthCheck{Current: "readFile('/etc/passwd') == ''"}, FieldCurrent, "undeclared reference to 'readFile'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.APIVersion, tt.check.Kind = "example.com/v1", "Widget"
			ok := HealthCheck{APIVersion: "v1", Kind: "Service", Current: "true"}
			_, err := CompileRules([]HealthCheck{ok, tt.check})
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("CompileRules() = %v, want a *CompileError", err)
			}
			if ce.Index != 1 || ce.Field != tt.wantField || !strings.Contains(ce.Err.Error(), tt.wantErr) {
				t.Errorf("CompileRules() = %d %s %q, want 1 %s containing %q", ce.Index, ce.Field, ce.Err, tt.wantField, tt.wantErr)
			}
			if strings.Contains(ce.Err.Error(), "\n") {
				t.Errorf("the error spans lines: %q", ce.Err)
			}
		})
	}
}

func customWidget(st map[string]any) *unstructured.Unstructured {
	content := map[string]any{"spec": map[string]any{"size": "L"}}
	if st != nil {
		content["status"] = st
	}
	return obj("example.com/v1", "Widget", content)
}

func TestHealthRules(t *testing.T) {
	certLike := HealthCheck{APIVersion: "example.com/v1", Kind: "Widget",
		Current:    "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
		InProgress: "!has(status.conditions)",
		Failed:     "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False' && c.reason == 'Failed')",
		Message:    "status.conditions.filter(c, c.type == 'Ready')[0].message",
	}
	tests := []struct {
		name       string
		check      HealthCheck
		u          *unstructured.Unstructured
		want       kstatus.Status
		wantReason string
		wantMsg    string
	}{{
		name:  "failed holds: the message expression's result",
		check: certLike, u: customWidget(map[string]any{"conditions": conds(cond("Ready", "False", "Failed", "issuer letsencrypt not found"))}),
		want: kstatus.FailedStatus, wantReason: status.ReasonHealthCheckFailed, wantMsg: "issuer letsencrypt not found",
	}, {
		name:  "no status at all: inProgress holds (absent fields are empty maps)",
		check: certLike, u: customWidget(nil),
		want: kstatus.InProgressStatus, wantMsg: "health check: not current yet",
	}, {
		name:  "current holds",
		check: certLike, u: customWidget(map[string]any{"conditions": conds(cond("Ready", "True", "Issued", "ok"))}),
		want: kstatus.CurrentStatus, wantMsg: "ok",
	}, {
		name:  "none holds: in progress, with the object's own Ready reason and message",
		check: HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase == 'Done'"},
		u:     customWidget(map[string]any{"phase": "Pending", "conditions": conds(cond("Ready", "False", "Waiting", "for the bucket"))}),
		want:  kstatus.InProgressStatus, wantMsg: "Ready=False Waiting: for the bucket",
	}, {
		name:  "an expression reading a field that is not there does not hold",
		check: HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase == 'Done'"},
		u:     customWidget(map[string]any{"conditions": conds()}),
		want:  kstatus.InProgressStatus, wantMsg: "health check: not current yet",
	}, {
		name:  "an expression of the wrong types cannot be evaluated",
		check: HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase > 3"},
		u:     customWidget(map[string]any{"phase": "Done"}),
		want:  kstatus.InProgressStatus, wantReason: status.ReasonHealthCheckError,
		wantMsg: "health check current could not be evaluated: no such overload",
	}, {
		name:  "a dyn expression whose result is not a bool is an error",
		check: HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase"},
		u:     customWidget(map[string]any{"phase": "Done"}),
		want:  kstatus.InProgressStatus, wantReason: status.ReasonHealthCheckError,
		wantMsg: "health check current could not be evaluated: the result is of type string, not bool",
	}, {
		name:  "self reaches any top-level field",
		check: HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "size(self.webhooks) > 0"},
		u:     obj("example.com/v1", "Widget", map[string]any{"webhooks": []any{map[string]any{"name": "a"}}}),
		want:  kstatus.CurrentStatus, wantMsg: "health check: current holds",
	}, {
		name: "the cost limit stops an expression that would run for long",
		check: HealthCheck{APIVersion: "example.com/v1", Kind: "Widget",
			Current: "status.items.all(a, status.items.all(b, status.items.all(c, a + b + c >= 0)))"},
		u: customWidget(map[string]any{"items": func() []any {
			l := make([]any, 200)
			for i := range l {
				l[i] = int64(i)
			}
			return l
		}()}),
		want: kstatus.InProgressStatus, wantReason: status.ReasonHealthCheckError,
		wantMsg: "health check current could not be evaluated: operation cancelled: actual cost limit exceeded",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := CompileRules([]HealthCheck{tt.check})
			if err != nil {
				t.Fatal(err)
			}
			res := Result{Status: kstatus.CurrentStatus, Message: "Resource is current"}
			if !applyRule(&res, rules, tt.u, status.Redactor{}) {
				t.Fatal("the rule was not applied")
			}
			if res.Status != tt.want || res.Reason != tt.wantReason || res.Message != tt.wantMsg {
				t.Errorf("applyRule() = %s %q %q, want %s %q %q", res.Status, res.Reason, res.Message, tt.want, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

func TestHealthRulesOfOtherKindsAndOptional(t *testing.T) {
	rules, err := CompileRules([]HealthCheck{
		{APIVersion: "example.com/v1", Kind: "Widget", Optional: true},
		{APIVersion: "example.com/v2", Kind: "Widget", Current: "false", Optional: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := Result{Status: kstatus.CurrentStatus}
	if applyRule(&res, rules, obj("example.com/v1", "Gadget", map[string]any{}), status.Redactor{}) {
		t.Error("a rule was applied to a kind it does not name")
	}
	if applyRule(&res, rules, customWidget(nil), status.Redactor{}) || !rules.optional(customWidget(nil).GroupVersionKind()) {
		t.Error("optional alone must leave the verdict and mark the kind optional")
	}
	v2 := obj("example.com/v2", "Widget", map[string]any{})
	if !applyRule(&res, rules, v2, status.Redactor{}) || res.Status != kstatus.InProgressStatus || !rules.optional(v2.GroupVersionKind()) {
		t.Errorf("example.com/v2 Widget: %s, optional %t", res.Status, rules.optional(v2.GroupVersionKind()))
	}
	terminating := Result{Status: kstatus.TerminatingStatus}
	if applyRule(&terminating, rules, v2, status.Redactor{}) || terminating.Status != kstatus.TerminatingStatus {
		t.Errorf("an object being deleted: %s, want Terminating", terminating.Status)
	}
	var none *Rules
	if applyRule(&res, none, v2, status.Redactor{}) || none.optional(v2.GroupVersionKind()) {
		t.Error("nil Rules must judge nothing")
	}
}
