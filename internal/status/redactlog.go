package status

import (
	"errors"

	"github.com/go-logr/logr"
)

// MaxLogLevel is the most verbose level a Logger passes on. The operator's
// own lines and Helm's debug output are at V(1); client-go logs, through
// the logger of the context a request is made with, each request at V(6)
// and above, and the whole body of each response at V(8): a resource with
// all its values, which no redaction can be trusted to find in every form.
const MaxLogLevel = 5

// Logger returns l with every line it logs redacted, at every level: its
// message, its error and its string and error values (Redact: in a log line
// the operator's words cannot be told from text it did not write, so all of
// it is redacted); lines more verbose than MaxLogLevel are dropped. The
// reconciler puts it in the context of each reconcile, so that every line
// logged under it — the operator's own, Helm's debug output, the storage
// drivers', client-go's — is redacted of the resource's values. Lines are
// not shortened. Nothing is redacted for a level that is off.
func (r Redactor) Logger(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	if d, ok := sink.(logr.CallDepthLogSink); ok {
		sink = d.WithCallDepth(1) // the caller, not the wrapper, is named
	}
	return l.WithSink(&redactingSink{sink: sink, r: r})
}

// redactingSink redacts what it passes on to sink.
type redactingSink struct {
	sink logr.LogSink
	r    Redactor
}

func (s *redactingSink) Init(info logr.RuntimeInfo) { s.sink.Init(info) }

func (s *redactingSink) Enabled(level int) bool {
	return level <= MaxLogLevel && s.sink.Enabled(level)
}

func (s *redactingSink) Info(level int, msg string, kv ...any) {
	s.sink.Info(level, s.r.Redact(msg), s.values(kv)...)
}

func (s *redactingSink) Error(err error, msg string, kv ...any) {
	if err != nil {
		err = errors.New(s.r.Redact(err.Error()))
	}
	s.sink.Error(err, s.r.Redact(msg), s.values(kv)...)
}

func (s *redactingSink) WithValues(kv ...any) logr.LogSink {
	return &redactingSink{sink: s.sink.WithValues(s.values(kv)...), r: s.r}
}

func (s *redactingSink) WithName(name string) logr.LogSink {
	return &redactingSink{sink: s.sink.WithName(name), r: s.r}
}

func (s *redactingSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.sink.(logr.CallDepthLogSink); ok {
		return &redactingSink{sink: d.WithCallDepth(depth), r: s.r}
	}
	return s
}

// values returns kv with its string and error values redacted; keys and
// other values (numbers, durations, names) are kept.
func (s *redactingSink) values(kv []any) []any {
	if len(kv) == 0 {
		return kv
	}
	out := make([]any, len(kv))
	copy(out, kv)
	for i := 1; i < len(out); i += 2 {
		switch v := out[i].(type) {
		case string:
			out[i] = s.r.Redact(v)
		case error:
			if v != nil {
				out[i] = s.r.Redact(v.Error())
			}
		}
	}
	return out
}
