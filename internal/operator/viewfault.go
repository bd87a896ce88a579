package operator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// The test-only view perturbation (issue 28): an environment variable that
// the product never sets, read once when the manager is built. Unset,
// nothing is wrapped.
//
// ViewEnv is "<mode>:<resource>:<file>": the watches of resource (the
// plural of the URL path: "nginxes", "secrets", "configmaps") of every
// informer of the process are perturbed while file exists (the window; a
// file there at start opens it from the start), by mode:
//
//   - lag: their events are held back during the window, then delivered in
//     order when it closes: the operator's view of that resource is stale
//     for the window, then catches up;
//   - missed: their events are dropped during the window; when it closes,
//     each watch that was open during it ends with 410 Expired, as a watch
//     that fell too far behind does, so that the informer lists again.
//
// The initial events of a watch that asks for them (sendInitialEvents, the
// informers' streamed list) are never perturbed: the list is the truth the
// informer starts from. Each event held back or dropped, and each window's
// end, is written to stderr (the operator's log), with the event's type and
// the watch's path, never its object.
const ViewEnv = "HELM_APP_OPERATOR_TEST_VIEW"

// viewModes are the modes of ViewEnv.
const (
	viewLag    = "lag"
	viewMissed = "missed"
)

// viewPoll is how often an idle perturbed watch looks whether the window
// has closed.
const viewPoll = 50 * time.Millisecond

var viewResource = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// withViewFault returns restConfig unchanged unless getenv sets ViewEnv;
// then a copy whose watches of the resource named there are perturbed (see
// ViewEnv). Every informer of the process is built from this config: the
// manager's (the watched resources, the metadata of Helm's release
// records) and the cache of the releases' objects.
func withViewFault(restConfig *rest.Config, getenv func(string) string) (*rest.Config, error) {
	s := getenv(ViewEnv)
	if s == "" {
		return restConfig, nil
	}
	v, err := parseViewFault(s)
	if err != nil {
		return nil, err
	}
	wrapped := rest.CopyConfig(restConfig)
	wrapped.Wrap(func(rt http.RoundTripper) http.RoundTripper { return viewTransport{rt: rt, v: v} })
	return wrapped, nil
}

// parseViewFault reads ViewEnv strictly.
func parseViewFault(s string) (*viewFault, error) {
	mode, rest, _ := strings.Cut(s, ":")
	resource, file, ok := strings.Cut(rest, ":")
	switch {
	case !ok || (mode != viewLag && mode != viewMissed):
		return nil, fmt.Errorf("%s must be lag:<resource>:<file> or missed:<resource>:<file>, got %q", ViewEnv, s)
	case !viewResource.MatchString(resource):
		return nil, fmt.Errorf("%s: %q is not the name of a resource (the plural of its path, e.g. secrets)", ViewEnv, resource)
	case !filepath.IsAbs(file):
		return nil, fmt.Errorf("%s: the window's file must be an absolute path, got %q", ViewEnv, file)
	}
	return &viewFault{mode: mode, resource: resource, file: file, log: os.Stderr}, nil
}

// viewFault is the parsed ViewEnv.
type viewFault struct {
	mode, resource, file string
	log                  io.Writer
	mu                   sync.Mutex
	// perturbed counts the events held back or dropped, for tests.
	perturbed atomic.Int64
}

func (v *viewFault) count() int { return int(v.perturbed.Load()) }

// open reports whether the window is open: its file exists.
func (v *viewFault) open() bool {
	_, err := os.Stat(v.file)
	return err == nil
}

func (v *viewFault) logf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, _ = fmt.Fprintf(v.log, "%s %s: "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339Nano), ViewEnv}, args...)...)
}

// perturbs reports whether req is a watch of v's resource.
func (v *viewFault) perturbs(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	if w := req.URL.Query().Get("watch"); w != "true" && w != "1" {
		return false
	}
	p := strings.TrimSuffix(req.URL.Path, "/")
	return p[strings.LastIndex(p, "/")+1:] == v.resource
}

type viewTransport struct {
	rt http.RoundTripper
	v  *viewFault
}

func (t viewTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.v.perturbs(req) {
		return t.rt.RoundTrip(req)
	}
	// The events are read one by one: JSON, whatever the client would
	// rather have (the informers decode what the server answers).
	req = req.Clone(req.Context())
	req.Header.Set("Accept", jsonOnly(req.Header.Get("Accept")))
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	q := req.URL.Query()
	pr, pw := io.Pipe()
	s := &viewStream{v: t.v, src: resp.Body, out: pw, what: req.URL.Path,
		initial: q.Get("sendInitialEvents") == "true", done: make(chan struct{})}
	go s.pump()
	resp.Body = viewBody{PipeReader: pr, s: s}
	return resp, nil
}

// jsonOnly is the Accept header accept without its protobuf media types.
func jsonOnly(accept string) string {
	var keep []string
	for _, t := range strings.Split(accept, ",") {
		if t = strings.TrimSpace(t); t != "" && !strings.HasPrefix(t, "application/vnd.kubernetes.protobuf") {
			keep = append(keep, t)
		}
	}
	if len(keep) == 0 {
		return "application/json"
	}
	return strings.Join(keep, ",")
}

// viewBody is a perturbed watch's body: closing it ends the stream.
type viewBody struct {
	*io.PipeReader
	s *viewStream
}

func (b viewBody) Close() error {
	b.s.stop()
	return b.PipeReader.Close()
}

// viewStream copies one watch's events from the server (src) to the
// informer (out), perturbed while the window is open.
type viewStream struct {
	v    *viewFault
	src  io.ReadCloser
	out  *io.PipeWriter
	what string
	// initial: the stream begins with the initial events, never perturbed,
	// which end with a bookmark so annotated.
	initial bool

	once sync.Once
	done chan struct{}
}

func (s *viewStream) stop() {
	s.once.Do(func() {
		close(s.done)
		_ = s.src.Close()
	})
}

// watchEvent is what the stream reads of an event.
type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"object"`
}

// expired is the event that ends a watch that fell behind.
const expired = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
	`"message":"too old resource version: the events of a window were dropped (` + ViewEnv + `)","reason":"Expired","code":410}}` + "\n"

func (s *viewStream) pump() {
	defer s.stop()
	events := make(chan json.RawMessage)
	errc := make(chan error, 1)
	go func() {
		dec := json.NewDecoder(s.src)
		for {
			var m json.RawMessage
			if err := dec.Decode(&m); err != nil {
				errc <- err
				return
			}
			select {
			case events <- m:
			case <-s.done:
				return
			}
		}
	}()
	tick := time.NewTicker(viewPoll)
	defer tick.Stop()
	var held []json.RawMessage
	inWindow, perturbed := false, 0
	write := func(ms ...json.RawMessage) bool {
		for _, m := range ms {
			if _, err := s.out.Write(append(m, '\n')); err != nil {
				return false
			}
		}
		return true
	}
	// closed ends a window: it delivers what was held (lag), or ends the
	// watch with 410 Expired (missed); it reports whether the stream goes on.
	closed := func() bool {
		inWindow = false
		if s.v.mode == viewMissed {
			s.v.logf("window closed on the watch %s: %d event(s) dropped; the watch ends with 410 Expired", s.what, perturbed)
			_, _ = io.WriteString(s.out, expired)
			_ = s.out.Close()
			return false
		}
		s.v.logf("window closed on the watch %s: %d event(s) held back, delivered now", s.what, perturbed)
		ok := write(held...)
		held, perturbed = nil, 0
		return ok
	}
	for {
		select {
		case m := <-events:
			if s.initial {
				var ev watchEvent
				if json.Unmarshal(m, &ev) == nil && ev.Type == "BOOKMARK" && ev.Object.Metadata.Annotations["k8s.io/initial-events-end"] == "true" {
					s.initial = false
				}
				if !write(m) {
					return
				}
				continue
			}
			if s.v.open() {
				inWindow = true
				perturbed++
				s.v.perturbed.Add(1)
				verb := "dropped"
				if s.v.mode == viewLag {
					held = append(held, m)
					verb = "held back"
				}
				var ev watchEvent
				_ = json.Unmarshal(m, &ev)
				s.v.logf("%s an event (%s) of the watch %s", verb, ev.Type, s.what)
				continue
			}
			if inWindow && !closed() {
				return
			}
			if !write(m) {
				return
			}
		case <-tick.C:
			if inWindow && !s.v.open() && !closed() {
				return
			}
			if !inWindow && !s.initial && s.v.open() {
				// Open while the watch is quiet: a watch open during the
				// window ends with it, events or not.
				inWindow = true
			}
		case err := <-errc:
			// The server ended the watch: what was held is delivered first.
			write(held...)
			_ = s.out.CloseWithError(err)
			return
		case <-s.done:
			return
		}
	}
}
