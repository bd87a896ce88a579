package status

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// RedactedMark replaces a value of the resource's spec found in a message.
const RedactedMark = "[redacted]"

// minRedactedLength is the shortest value the Redactor hides wherever it
// appears: shorter ones are too common ("true", "nginx", "3") to be told
// apart from ordinary words of a message. Shorter values are hidden where
// they appear quoted, and every value in an API field error's value.
const minRedactedLength = 6

// minEncodedLength is the shortest base64 form of a value the Redactor
// hides: a shorter one (a value of one byte, unpadded) is two letters.
const minEncodedLength = 4

// Redactor hides the values of a resource's spec in messages. Errors from
// Helm and the API server can quote a rejected value; those messages go to
// status, events and logs, none of which may carry values. It redacts what
// may quote values only — errors, Helm's descriptions — never the operator's
// own words around them (see RedactMessage). The exact rule is in
// docs/status.md ("Redaction").
type Redactor struct {
	// long are the values hidden wherever they appear, longest first.
	long []string
	// short are the textual forms of all values, hidden where quoted.
	short []string
}

// NewRedactor collects the values of vals (strings, numbers, booleans),
// except those in keep (the resource's own name, the chart's name: words
// the messages need).
func NewRedactor(vals map[string]any, keep ...string) Redactor {
	kept := map[string]bool{}
	for _, k := range keep {
		kept[k] = true
	}
	seen := map[string]bool{}
	var r Redactor
	add := func(s string) {
		if s == "" || kept[s] || seen[s] {
			return
		}
		seen[s] = true
		r.short = append(r.short, s)
		if len(s) >= minRedactedLength {
			r.long = append(r.long, s)
		}
		// A value a chart encodes (b64enc) is the value all the same.
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if e := enc.EncodeToString([]byte(s)); len(e) >= minEncodedLength && !seen[e] && !kept[e] {
				seen[e] = true
				r.long = append(r.long, e)
			}
		}
	}
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
			add(t)
		case bool:
			add(strconv.FormatBool(t))
		case int64:
			add(strconv.FormatInt(t, 10))
		case int:
			add(strconv.Itoa(t))
		case float64:
			add(strconv.FormatFloat(t, 'f', -1, 64))
		case json.Number:
			add(t.String())
		}
	}
	walk(vals)
	// Longest first, so that a value containing another is hidden whole.
	for _, l := range [][]string{r.long, r.short} {
		sort.Slice(l, func(i, j int) bool { return len(l[i]) > len(l[j]) || len(l[i]) == len(l[j]) && l[i] < l[j] })
	}
	return r
}

// Foreign marks s, interpolated into a message of the operator's own words,
// as text the operator did not write: an error of Helm or the API server, a
// description Helm recorded. Such text may quote the resource's values;
// RedactMessage redacts it and nothing else. The marks are two characters
// of Unicode's private use area, which no Kubernetes or Helm message uses.
func Foreign(s string) string { return foreignOpen + Plain(s) + foreignClose }

const (
	foreignOpen  = "\ue000"
	foreignClose = "\ue001"
)

// Plain removes the marks Foreign put in msg.
func Plain(msg string) string {
	if !strings.ContainsAny(msg, foreignOpen+foreignClose) {
		return msg
	}
	return strings.NewReplacer(foreignOpen, "", foreignClose, "").Replace(msg)
}

// RedactMessage returns a message of the operator's (a failure's summary, its
// advice, reason and field names, enum words such as "true") with the
// values redacted from the text marked Foreign only, and the marks removed.
// The operator's own words are never redacted, even when a value of the spec
// happens to be one of them. An unclosed mark (the message was cut short)
// runs to the end.
func (r Redactor) RedactMessage(msg string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, foreignOpen)
		if i < 0 {
			b.WriteString(Plain(msg))
			return b.String()
		}
		b.WriteString(Plain(msg[:i]))
		rest := msg[i+len(foreignOpen):]
		j := strings.Index(rest, foreignClose)
		if j < 0 {
			j = len(rest)
		}
		b.WriteString(r.Redact(rest[:j]))
		msg = rest[min(j+len(foreignClose), len(rest)):]
	}
}

// Redact returns msg, all of it text that may quote values, with every
// collected value, and every value an API field error quotes, replaced by
// RedactedMark.
func (r Redactor) Redact(msg string) string {
	msg = redactFieldValues(Plain(msg))
	for _, v := range r.long {
		msg = strings.ReplaceAll(msg, v, RedactedMark)
		// A multi-line value may be quoted with its newlines escaped.
		if strings.Contains(v, "\n") {
			msg = strings.ReplaceAll(msg, strings.ReplaceAll(v, "\n", `\n`), RedactedMark)
		}
	}
	for _, v := range r.short {
		for _, q := range []string{`"`, `\"`, `'`} {
			msg = strings.ReplaceAll(msg, q+v+q, q+RedactedMark+q)
		}
	}
	return msg
}

// fieldValue finds the value-bearing part of the API server's field errors
// ("spec.replicas: Invalid value: 3: must be ...", "Unsupported value: "x"").
var fieldValue = regexp.MustCompile(`(Invalid value|Unsupported value|Duplicate value|Not found): `)

// redactFieldValues replaces the value each field error quotes, whatever it
// is: the API server quotes what it rejected, and what it rejected came
// from the spec or from a template that used it.
func redactFieldValues(msg string) string {
	var b strings.Builder
	for {
		loc := fieldValue.FindStringIndex(msg)
		if loc == nil {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:loc[1]])
		rest := msg[loc[1]:]
		n := valueLength(rest)
		if n > 0 {
			b.WriteString(RedactedMark)
		}
		msg = rest[n:]
	}
}

// valueLength is the length of the value that starts s, printed the way
// field errors print it: %q for a string, JSON for a composite, %v else.
func valueLength(s string) int {
	switch {
	case strings.HasPrefix(s, `"`):
		if q, err := strconv.QuotedPrefix(s); err == nil {
			return len(q)
		}
	case strings.HasPrefix(s, `\"`):
		// The error was itself quoted inside another message.
		if i := strings.Index(s[2:], `\"`); i >= 0 {
			return i + 4
		}
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "["):
		dec := json.NewDecoder(strings.NewReader(s))
		var v any
		if dec.Decode(&v) == nil {
			return int(dec.InputOffset())
		}
	}
	if i := strings.IndexAny(s, ":,; )\"\\"); i >= 0 {
		return i
	}
	return len(s)
}
