package readiness

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// HealthCheck is one entry of a watch's healthChecks (watches.yaml), as
// written: CEL expressions over an object of APIVersion and Kind.
type HealthCheck struct {
	APIVersion, Kind string
	// Current, InProgress and Failed are boolean expressions; Message, a
	// string expression whose result is the object's message. Each may be
	// empty (unset).
	Current, InProgress, Failed, Message string
	// Optional keeps the kind's objects from blocking readiness: they are
	// reported (Result.Advisory), not counted.
	Optional bool
}

// HealthCostLimit bounds the cost of evaluating one expression, in CEL's
// cost units (about one per value visited or compared): the bound
// Kubernetes gives one CEL validation rule of a CRD. An expression that
// goes past it is an error (HealthCheckError), not a hang.
const HealthCostLimit = 1_000_000

// healthVariables are the variables an expression may use: the object's
// top-level fields by name, an absent one an empty map (so that
// has(status.conditions) is false rather than an error), and self, the
// whole object, for any other top-level field.
var healthVariables = []string{"apiVersion", "kind", "metadata", "spec", "status", "data"}

// The fields of a HealthCheck that hold expressions, in the order they are
// evaluated (failed first) and their names in watches.yaml.
const (
	FieldFailed     = "failed"
	FieldInProgress = "inProgress"
	FieldCurrent    = "current"
	FieldMessage    = "message"
)

// CompileError is a health check whose expression does not compile or does
// not have the type its field needs.
type CompileError struct {
	// Index is the check's position in healthChecks, Field the field
	// (FieldCurrent, ...).
	Index int
	Field string
	// Err is CEL's error, on one line.
	Err error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("healthChecks[%d].%s: %v", e.Index, e.Field, e.Err)
}

// Rules are a watch's compiled health checks, by apiVersion and kind. The
// nil *Rules has none.
type Rules struct {
	kinds map[schema.GroupVersionKind]*rule
}

// rule is one compiled HealthCheck; a nil program is an unset field.
type rule struct {
	failed, inProgress, current, message cel.Program
	optional                             bool
}

// CompileRules compiles and type-checks the health checks: the boolean
// fields must be of type bool (or dyn, checked when evaluated), message a
// string (or dyn). The first expression that does not is a *CompileError.
// Nil checks give nil Rules.
func CompileRules(checks []HealthCheck) (*Rules, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	opts := []cel.EnvOption{cel.Variable("self", cel.DynType)}
	for _, v := range healthVariables {
		opts = append(opts, cel.Variable(v, cel.DynType))
	}
	// The standard library only: no extension reads anything but the
	// variables, and there is no function that reaches outside them.
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("the CEL environment: %w", err)
	}
	rs := &Rules{kinds: map[schema.GroupVersionKind]*rule{}}
	for i, hc := range checks {
		r := &rule{optional: hc.Optional}
		for _, f := range []struct {
			name, expr string
			want       *cel.Type
			into       *cel.Program
		}{
			{FieldFailed, hc.Failed, cel.BoolType, &r.failed},
			{FieldInProgress, hc.InProgress, cel.BoolType, &r.inProgress},
			{FieldCurrent, hc.Current, cel.BoolType, &r.current},
			{FieldMessage, hc.Message, cel.StringType, &r.message},
		} {
			if strings.TrimSpace(f.expr) == "" {
				continue
			}
			prg, err := compile(env, f.expr, f.want)
			if err != nil {
				return nil, &CompileError{Index: i, Field: f.name, Err: err}
			}
			*f.into = prg
		}
		rs.kinds[schema.FromAPIVersionAndKind(hc.APIVersion, hc.Kind)] = r
	}
	return rs, nil
}

// compile parses and type-checks expr, which must be of type want or dyn.
func compile(env *cel.Env, expr string, want *cel.Type) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		// CEL's display string spans lines (a caret under the column);
		// the one-line form keeps line:column and the message.
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	if out := ast.OutputType(); !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression is of type %s, want %s", out, want)
	}
	return env.Program(ast, cel.CostLimit(HealthCostLimit))
}

// of returns the rule for objects of gvk, nil when none.
func (rs *Rules) of(gvk schema.GroupVersionKind) *rule {
	if rs == nil {
		return nil
	}
	return rs.kinds[gvk]
}

// judge evaluates the rule on u: failed, then inProgress, then current;
// the first that holds is the verdict, none InProgress. An expression that
// reads a field the object does not have does not hold. The message is the
// message expression's result, else the object's own Ready condition's
// reason and message, else which rule held. An expression that cannot be
// evaluated otherwise (a wrong type, the cost limit) makes the
// object InProgress with reason HealthCheckError and CEL's error.
func (r *rule) judge(u *unstructured.Unstructured) (st kstatus.Status, reason, message string) {
	vars := map[string]any{"self": u.Object}
	for _, v := range healthVariables {
		if val, ok := u.Object[v]; ok && val != nil {
			vars[v] = val
		} else {
			vars[v] = map[string]any{}
		}
	}
	for _, step := range []struct {
		name string
		prg  cel.Program
		st   kstatus.Status
	}{
		{FieldFailed, r.failed, kstatus.FailedStatus},
		{FieldInProgress, r.inProgress, kstatus.InProgressStatus},
		{FieldCurrent, r.current, kstatus.CurrentStatus},
	} {
		if step.prg == nil {
			continue
		}
		holds, err := evalBool(step.prg, vars)
		if err != nil && absentField(err) {
			// A field the expression reads is not there yet (no
			// status.conditions before a controller acts): the
			// expression does not hold, which is no error of the rule.
			holds, err = false, nil
		}
		if err != nil {
			return kstatus.InProgressStatus, status.ReasonHealthCheckError,
				"health check " + step.name + " could not be evaluated: " + status.Foreign(oneLine(err.Error()))
		}
		if holds {
			st = step.st
			break
		}
	}
	if st == "" {
		st = kstatus.InProgressStatus
	}
	if st == kstatus.FailedStatus {
		reason = status.ReasonHealthCheckFailed
	}
	if r.message != nil {
		msg, err := evalString(r.message, vars)
		switch {
		case err != nil && absentField(err):
			// Nothing to say yet: the message below stands.
		case err != nil:
			return kstatus.InProgressStatus, status.ReasonHealthCheckError,
				"health check message could not be evaluated: " + status.Foreign(oneLine(err.Error()))
		case msg != "":
			return st, reason, status.Foreign(oneLine(msg))
		}
	}
	if own, _, ok := readyCondition(u); ok && st != kstatus.CurrentStatus {
		return st, reason, own
	}
	switch st {
	case kstatus.FailedStatus:
		message = "health check: failed holds"
	case kstatus.CurrentStatus:
		message = "health check: current holds"
	default:
		message = "health check: not current yet"
	}
	return st, reason, message
}

// absentField reports whether err is CEL's for a field or key that the
// object does not have.
func absentField(err error) bool {
	return strings.HasPrefix(err.Error(), "no such key:")
}

func evalBool(prg cel.Program, vars map[string]any) (bool, error) {
	out, _, err := prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the result is of type %s, not bool", out.Type().TypeName())
	}
	return bool(b), nil
}

func evalString(prg cel.Program, vars map[string]any) (string, error) {
	out, _, err := prg.Eval(vars)
	if err != nil {
		return "", err
	}
	s, ok := out.(types.String)
	if !ok {
		return "", fmt.Errorf("the result is of type %s, not string", out.Type().TypeName())
	}
	return string(s), nil
}

// applyRule replaces res's verdict with the watch's health check for u's
// kind, when there is one with expressions, and reports whether it did.
// An object being deleted stays Terminating: no rule of its status makes
// it ready.
func applyRule(res *Result, rs *Rules, u *unstructured.Unstructured, redactor status.Redactor) bool {
	r := rs.of(u.GroupVersionKind())
	if r == nil || (r.failed == nil && r.current == nil) || res.Status == kstatus.TerminatingStatus {
		return false // none, or optional alone: the other rules' verdict stands
	}
	res.Status, res.Reason, res.Message = r.judge(u)
	res.Message = redactor.Safe(res.Message, MaxObjectMessageLength)
	return true
}

// optional reports whether the watch marks gvk's objects optional: reported
// (Result.Advisory), never blocking readiness, whoever judged them.
func (rs *Rules) optional(gvk schema.GroupVersionKind) bool {
	r := rs.of(gvk)
	return r != nil && r.optional
}
