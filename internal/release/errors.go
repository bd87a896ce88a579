package release

import (
	"errors"
	"strings"
	"text/template"
	"time"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Error is a failure classified where it was born.
type Error struct {
	// Reason is the status reason (status.ReasonUpgradeError, ...).
	Reason string
	// Action is the Helm action that failed, empty for failures outside one.
	Action string
	// Revision is the revision Helm stored for the failed attempt, 0 for none.
	Revision int
	// StalledReason is set when retrying cannot help without a change to the resource.
	StalledReason string
	// Refused is set when the operator's own check refused the action
	// before it ran (preflight.go): nothing was written (status.Failure.Refused).
	Refused bool
	// Summary says, in words a user reads, what was being done ("Upgrade of release web to revision 3").
	// It is the operator's own text, never redacted: anything in it that the
	// operator did not write (a description Helm recorded) is marked
	// status.Foreign.
	Summary string
	// Err is the underlying error, typically Helm's.
	Err error
	// Remedy says what the operator did about the failure, by the watch's
	// remediation setting ("rolled back to revision 2"); it ends the message.
	// Like Summary, it marks the errors it quotes status.Foreign.
	Remedy string
	// RetryAfter, when positive, is when to try again instead of the
	// backoff: the moment the failure is known to end (a lock becomes stale).
	RetryAfter time.Duration
	// Superseded is set when the action failed because a newer generation
	// of the resource preempted it (preempt.go).
	Superseded *Superseded
}

// SupersededBy returns the preemption err reports, nil for none.
func SupersededBy(err error) *Superseded {
	var e *Error
	if errors.As(err, &e) {
		return e.Superseded
	}
	var s *Superseded
	if errors.As(err, &s) {
		return s
	}
	return nil
}

// RetryAfter returns the retry delay err asks for, 0 for the backoff's.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return max(e.RetryAfter.Round(time.Second), time.Second)
	}
	return 0
}

func (e *Error) Error() string { return status.Plain(e.marked()) }

func (e *Error) Unwrap() error { return e.Err }

// marked is the message with the text the operator did not write — the
// underlying error, and what the summary and remedy marked — marked
// status.Foreign, so that redaction hides values in it and only in it, and
// the remedy, which ends it, marked status.Tail, so that it survives the
// status' bound on message length.
func (e *Error) marked() string {
	msg := e.Summary
	if e.Err != nil {
		msg += ": " + status.Foreign(e.Err.Error())
	}
	if e.Remedy != "" {
		msg += status.Tail("; " + e.Remedy)
	}
	return msg
}

// Failure converts e into the status package's vocabulary. Its message is
// marked (marked): it reaches a user through status.Redactor.Safe, which
// redacts it whole before it shortens it.
func (e *Error) Failure() *status.Failure {
	return &status.Failure{
		Reason:        e.Reason,
		Action:        e.Action,
		Revision:      e.Revision,
		Message:       e.marked(),
		StalledReason: e.StalledReason,
		Refused:       e.Refused,
	}
}

// AsFailure classifies any error: an *Error keeps its reason, anything else
// becomes a ReconcileError, all of whose message is foreign text.
func AsFailure(err error) *status.Failure {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Failure()
	}
	return &status.Failure{Reason: status.ReasonReconcileError, Message: status.Foreign(err.Error())}
}

// renderFailure tells whether a Helm error says the chart could not be
// rendered with these values, which no retry can fix. Helm v3 passes one
// such error through typed: an error of a template's execution that is not
// a `fail` or `required` (text/template's ExecError: a missing template, a
// function's error, tpl's). It flattens the others into text, so they are
// known by the prefixes its engine, manifest sorter and schema check write
// (each pattern is rendered by a chart of testdata/charts in render_test.go).
func renderFailure(err error) bool {
	if err == nil {
		return false
	}
	var exec template.ExecError
	if errors.As(err, &exec) {
		return true
	}
	msg := err.Error()
	for _, marker := range []string{
		"parse error at (",     // engine: a template does not parse
		"execution error at (", // engine: `fail` or `required` in a template
		"YAML parse error on ", // manifest sorter: a template rendered invalid YAML
		"values don't meet the specifications of the schema", // values.schema.json
	} {
		if strings.Contains(msg, marker) {
			return true
		}
	}
	return false
}
