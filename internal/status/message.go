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

// Bound returns msg on one line, with runs of white space (newlines included)
// folded to one space, at most max bytes long; a shortened message ends with
// TruncationMark and never splits a UTF-8 character.
func Bound(msg string, max int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) <= max {
		return msg
	}
	cut := max - len(TruncationMark)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + TruncationMark
}
