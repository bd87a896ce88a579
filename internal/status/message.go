package status

import (
	"strings"
	"unicode/utf8"
)

// MaxMessageLength bounds every condition and failedRelease message, in bytes.
// The API server rejects a whole status write when one message passes 32 KiB;
// this stays far below that and keeps `kubectl describe` readable.
const MaxMessageLength = 1024

// TruncationMark ends a message that Bound had to shorten.
const TruncationMark = " ...[truncated]"

// A message is composed with marks, characters of Unicode's private use
// area, which no Kubernetes or Helm message uses, and which Safe removes:
//   - Foreign text (foreignOpen ... foreignClose) is text the operator did
//     not write, the only text redacted;
//   - a Tail (tailMark) ends a message and is kept whole when the message
//     is shortened (a remediation's remedy);
//   - a Clip (clipMark) ends text the operator had to cut before it could
//     be redacted: what precedes it may be a value's beginning.
const (
	foreignOpen  = "\ue000"
	foreignClose = "\ue001"
	tailMark     = "\ue002"
	clipMark     = "\ue003"
	// clipShown is what a user reads where text was clipped.
	clipShown = "..."
)

// Foreign marks s, interpolated into a message of the operator's own words,
// as text the operator did not write: an error of Helm or the API server, a
// description Helm recorded, a condition or event message of the cluster.
// Such text may quote the resource's values; RedactMessage and Safe redact
// it and nothing else.
func Foreign(s string) string { return foreignOpen + unforeign(s) + foreignClose }

// Tail marks s as the end of a message that shortening keeps: Safe and
// Bound cut what precedes it, and s only if it alone takes more than half
// the bound. The operator's own words, with any foreign text in them marked.
func Tail(s string) string { return tailMark + s }

// Clip returns s, text the operator did not write, at most max bytes long,
// its mark included (never splitting a UTF-8 character). Text cut short ends with a mark that
// tells Redact to hide a value's beginning at its end; keep it until the
// text is redacted. For text kept in memory before it can be redacted (the
// API server's warnings).
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return Clipped(s[:runeCut(s, max-len(clipMark))])
}

// Clipped marks s, text the operator did not write, as cut short by someone
// else before it could be redacted (the API server cuts long warnings).
func Clipped(s string) string {
	if strings.HasSuffix(s, clipMark) {
		return s
	}
	return s + clipMark
}

// Plain removes the marks in msg; clipped text ends with "...". A plain
// message is not redacted: it is for errors that go on as errors, never to
// a user.
func Plain(msg string) string {
	if !strings.ContainsAny(msg, foreignOpen+foreignClose+tailMark+clipMark) {
		return msg
	}
	return strings.NewReplacer(foreignOpen, "", foreignClose, "", tailMark, "", clipMark, clipShown).Replace(msg)
}

// unforeign removes the marks of foreign text and of a tail, keeping clips,
// which Redact needs.
func unforeign(msg string) string {
	if !strings.ContainsAny(msg, foreignOpen+foreignClose+tailMark) {
		return msg
	}
	return strings.NewReplacer(foreignOpen, "", foreignClose, "", tailMark, "").Replace(msg)
}

// RedactMessage returns a message of the operator's (a failure's summary, its
// advice, reason and field names, enum words such as "true") with the
// values redacted from the text marked Foreign only, and the marks removed.
// The operator's own words are never redacted, even when a value of the spec
// happens to be one of them. An unclosed mark runs to the end. The message
// is not shortened: for one a user reads, use Safe.
func (r Redactor) RedactMessage(msg string) string {
	return eachForeign(msg, r.Redact)
}

// Safe is the one way a message that may quote values becomes one a user
// reads in status, an event or a log line: the values are redacted from the
// whole message first (RedactMessage), then it is folded to one line and
// shortened to max bytes as Bound does, its Tail kept. Since the cut comes
// after redaction, it cannot leave a value's beginning behind.
func (r Redactor) Safe(msg string, max int) string {
	head, tail, _ := strings.Cut(msg, tailMark)
	return bound(r.RedactMessage(head), r.RedactMessage(tail), max)
}

// Bound returns msg on one line, with runs of white space (newlines included)
// folded to one space, at most max bytes long; a shortened message ends with
// TruncationMark and never splits a UTF-8 character; a Tail is kept. It is
// for the operator's own words and for messages already redacted: foreign
// text still marked in msg, not redacted, is hidden whole, never cut (a
// message that may quote values is shortened by Safe, after redaction).
func Bound(msg string, max int) string {
	head, tail, _ := strings.Cut(msg, tailMark)
	return bound(hideForeign(head), hideForeign(tail), max)
}

// hideForeign replaces each foreign text of msg with RedactedMark.
func hideForeign(msg string) string {
	return eachForeign(msg, func(string) string { return RedactedMark })
}

// eachForeign returns msg with each foreign text replaced by what f makes
// of it, and every mark removed.
func eachForeign(msg string, f func(string) string) string {
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
		b.WriteString(Plain(f(rest[:j])))
		msg = rest[min(j+len(foreignClose), len(rest)):]
	}
}

// bound folds head and tail to one line and cuts head so that both fit in
// max bytes; tail is cut only if it alone takes more than half of max.
func bound(head, tail string, max int) string {
	tail = cut(strings.Join(strings.Fields(tail), " "), max/2)
	return cut(strings.Join(strings.Fields(head), " "), max-len(tail)) + tail
}

// cut returns msg if it fits in max bytes, else its beginning followed by
// TruncationMark, max bytes in all.
func cut(msg string, max int) string {
	if len(msg) <= max {
		return msg
	}
	return msg[:runeCut(msg, max-len(TruncationMark))] + TruncationMark
}

// runeCut is the largest length of at most n (0 for less) at which s can be
// cut without splitting a UTF-8 character.
func runeCut(s string, n int) int {
	if n <= 0 {
		return 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
