package status

import (
	"sort"
	"strings"
)

// RedactedMark replaces a value of the resource's spec found in a message.
const RedactedMark = "[redacted]"

// minRedactedLength is the shortest string value the Redactor hides: shorter
// ones are too common ("true", "nginx") to be told apart from ordinary words
// of a message, and too short to be a secret worth the name.
const minRedactedLength = 6

// Redactor hides the string values of a resource's spec in messages. Errors
// from Helm and the API server can quote a rejected value; those messages go
// to status, events and logs, none of which may carry values.
type Redactor struct {
	values []string
}

// NewRedactor collects the string values of vals, except those in keep (the
// resource's own name, the chart's name: words the messages need).
func NewRedactor(vals map[string]any, keep ...string) Redactor {
	seen := map[string]bool{}
	for _, k := range keep {
		seen[k] = true
	}
	var r Redactor
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		case string:
			if len(t) >= minRedactedLength && !seen[t] {
				seen[t] = true
				r.values = append(r.values, t)
			}
		}
	}
	walk(vals)
	// Longest first, so that a value containing another is hidden whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// Redact returns msg with every collected value replaced by RedactedMark.
func (r Redactor) Redact(msg string) string {
	for _, v := range r.values {
		msg = strings.ReplaceAll(msg, v, RedactedMark)
		// A multi-line value may be quoted with its newlines escaped.
		if strings.Contains(v, "\n") {
			msg = strings.ReplaceAll(msg, strings.ReplaceAll(v, "\n", `\n`), RedactedMark)
		}
	}
	return msg
}
