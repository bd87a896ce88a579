package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Event is one API request from the API server's audit log (one line, stage
// ResponseComplete, level Metadata).
type Event struct {
	// ID is the request's auditID; Stage where it was logged.
	ID, Stage   string
	User        string
	Verb        string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	URI         string
	Code        int
	Received    time.Time
}

type auditLine struct {
	ID    string `json:"auditID"`
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	URI   string `json:"requestURI"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// ParseAudit reads a JSON-lines audit log. Each request is returned once,
// at the first of its ResponseStarted (a watch, logged when it starts),
// ResponseComplete or Panic events; RequestReceived events are skipped, so a
// request counts once whatever the policy's omitStages. seen carries the
// requests already returned across calls on a growing log (nil for one
// call). A torn last line (the API server is still writing) is ignored; any
// other malformed line is an error.
func ParseAudit(r io.Reader, seen map[string]bool) ([]Event, error) {
	if seen == nil {
		seen = map[string]bool{}
	}
	var out []Event
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return out, nil // a line without its newline is still being written
		}
		if err != nil {
			return nil, err
		}
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", n, err)
		}
		if l.Stage != "ResponseStarted" && l.Stage != "ResponseComplete" && l.Stage != "Panic" {
			continue
		}
		if l.ID != "" {
			if seen[l.ID] {
				continue
			}
			seen[l.ID] = true
		}
		ev := Event{ID: l.ID, Stage: l.Stage, User: l.User.Username, Verb: l.Verb, URI: l.URI, Received: l.Received}
		if l.ObjectRef != nil {
			ev.Resource, ev.Subresource = l.ObjectRef.Resource, l.ObjectRef.Subresource
			ev.Namespace, ev.Name = l.ObjectRef.Namespace, l.ObjectRef.Name
		}
		if l.ResponseStatus != nil {
			ev.Code = l.ResponseStatus.Code
		}
		out = append(out, ev)
	}
}

// IsWrite reports whether verb changes state.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Key names a request by verb and resource: "get secrets",
// "patch benchapps/status", and for requests without an object "get
// discovery" (/api, /apis, /version) or "get openapi" (/openapi/...).
func (e Event) Key() string {
	if e.Resource == "" {
		path := e.URI
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		switch {
		case strings.HasPrefix(path, "/openapi"):
			return e.Verb + " openapi"
		case path == "/api" || path == "/apis" || path == "/version" || strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/apis/"):
			return e.Verb + " discovery"
		default:
			return e.Verb + " " + path
		}
	}
	if e.Subresource != "" {
		return e.Verb + " " + e.Resource + "/" + e.Subresource
	}
	return e.Verb + " " + e.Resource
}

// Tally counts requests.
type Tally struct {
	Requests int            `json:"requests"`
	Writes   int            `json:"writes"`
	ByKey    map[string]int `json:"byKey"`
}

// Count tallies the events of user whose request was received in [from, to).
func Count(events []Event, user string, from, to time.Time) Tally {
	t := Tally{ByKey: map[string]int{}}
	for _, e := range events {
		if e.User != user || e.Received.Before(from) || !e.Received.Before(to) {
			continue
		}
		t.Requests++
		if IsWrite(e.Verb) {
			t.Writes++
		}
		t.ByKey[e.Key()]++
	}
	return t
}

// Sum adds up the counts of keys.
func (t Tally) Sum(keys ...string) int {
	n := 0
	for _, k := range keys {
		n += t.ByKey[k]
	}
	return n
}

// StatusWrites counts writes to the status subresource of resource.
func (t Tally) StatusWrites(resource string) int {
	return t.Sum("update "+resource+"/status", "patch "+resource+"/status")
}

// LastRequest returns the time the last request of user was received, or the
// zero time.
func LastRequest(events []Event, user string) time.Time {
	var last time.Time
	for _, e := range events {
		if e.User == user && e.Received.After(last) {
			last = e.Received
		}
	}
	return last
}
