package status

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
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
// own words around them (see RedactMessage). Every message that may quote
// values reaches a user through Safe, which redacts it whole before it
// shortens it. The exact rule is in docs/status.md ("Redaction"). The zero
// Redactor knows no values: it hides only what API field errors quote.
type Redactor struct {
	// long are the values hidden wherever they appear, longest first: each
	// value of minRedactedLength or more, each such line of a multi-line
	// value, and their base64 forms.
	long []string
	// forms matches, for a long value with white space, quotes or
	// backslashes in it, the other forms a message may carry it in
	// (formsOf): compiled when a message is first redacted, as most
	// reconciles redact none; shared by the Redactor's copies.
	forms *valueForms
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
		// A line of a multi-line value (a PEM key's) is the value in part,
		// which an error may quote alone.
		if strings.ContainsAny(s, "\r\n") {
			for _, line := range strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' }) {
				if line = strings.TrimSpace(line); len(line) >= minRedactedLength && !seen[line] && !kept[line] {
					seen[line] = true
					r.long = append(r.long, line)
				}
			}
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
	r.forms = &valueForms{}
	return r
}

// valueForms are the patterns of formsOf of a Redactor's long values,
// compiled once, on first use.
type valueForms struct {
	once sync.Once
	re   map[string]*regexp.Regexp
}

// of returns the pattern of each value of long that has one.
func (f *valueForms) of(long []string) map[string]*regexp.Regexp {
	if f == nil {
		return nil
	}
	f.once.Do(func() {
		for _, v := range long {
			if re := formsOf(v); re != nil {
				if f.re == nil {
					f.re = map[string]*regexp.Regexp{}
				}
				f.re[v] = re
			}
		}
	})
	return f.re
}

// Redact returns msg, all of it text that may quote values, with every
// collected value, and every value an API field error quotes, replaced by
// RedactedMark. A value is found in its own form and in the forms a message
// may have turned it into (formsOf): its white space folded or escaped, its
// quotes escaped. Text that someone cut short before it could be redacted
// (Clip) has a trailing part of a value hidden too.
func (r Redactor) Redact(msg string) string {
	parts := strings.Split(unforeign(msg), clipMark)
	for i := range parts {
		parts[i] = r.redact(parts[i], i < len(parts)-1)
	}
	return strings.Join(parts, clipShown)
}

// redact is Redact of text without marks; cut tells that its end may be a
// value's beginning.
func (r Redactor) redact(msg string, cut bool) string {
	msg = redactFieldValues(msg)
	forms := r.forms.of(r.long)
	for _, v := range r.long {
		msg = strings.ReplaceAll(msg, v, RedactedMark)
		if re := forms[v]; re != nil {
			msg = re.ReplaceAllLiteralString(msg, RedactedMark)
		}
	}
	for _, v := range r.short {
		for _, q := range []string{`"`, `\"`, `'`} {
			msg = strings.ReplaceAll(msg, q+v+q, q+RedactedMark+q)
		}
	}
	if cut {
		msg = r.hideCutValue(msg)
	}
	return msg
}

// hideCutValue hides the end of msg when it is the beginning of a value, in
// its own form or with its white space folded: msg was cut there by someone
// else, maybe through a value.
func (r Redactor) hideCutValue(msg string) string {
	longest := 0
	for _, v := range r.long {
		for _, form := range []string{v, strings.Join(strings.Fields(v), " ")} {
			for n := min(len(form), len(msg)); n > longest; n-- {
				if strings.HasSuffix(msg, form[:n]) {
					longest = n
					break
				}
			}
		}
	}
	if longest == 0 {
		return msg
	}
	return msg[:len(msg)-longest] + RedactedMark
}

// formsOf returns the pattern of the forms other than its own that a
// message may carry v in, or nil when v has none: a value with white space
// (a multi-line PEM key, a sentence) is found with each run of white space
// folded to one space (Bound, kubectl, a policy's message), or written as
// escapes (`\n`, `\t`: JSON, Go's %q, YAML's double-quoted style; escaped
// again when an error quotes an error); a value with quotes or backslashes
// with them escaped, or a single quote doubled (YAML's single-quoted style).
func formsOf(v string) *regexp.Regexp {
	v = strings.TrimSpace(v)
	if !strings.ContainsFunc(v, func(c rune) bool { return unicode.IsSpace(c) || c == '"' || c == '\'' || c == '\\' }) {
		return nil
	}
	var b strings.Builder
	space := false
	for _, c := range v {
		if unicode.IsSpace(c) {
			if !space {
				b.WriteString(`(?:[\s\p{Z}]|\\+[nrt])+`)
			}
			space = true
			continue
		}
		space = false
		switch c {
		case '"':
			b.WriteString(`\\*"`)
		case '\\':
			b.WriteString(`\\+`)
		case '\'':
			b.WriteString(`(?:\\*'|'')`)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return regexp.MustCompile(b.String())
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
