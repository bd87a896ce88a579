package testutil

import (
	"net/http"

	"k8s.io/client-go/rest"
)

// Request is one request to the API server, as RecordRequests saw it.
type Request struct {
	Method, Path, LabelSelector string
	// Watch is true for a watch (the caches'), false for a get or a list.
	Watch bool
}

// RecordRequests returns a copy of cfg whose every request is passed to
// record, in the order they are made, before it goes to the server: for
// tests that count what an operator asks of the API server.
func RecordRequests(cfg *rest.Config, record func(Request)) *rest.Config {
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return recordingTransport{rt: rt, record: record}
	})
	return counted
}

type recordingTransport struct {
	rt     http.RoundTripper
	record func(Request)
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	t.record(Request{Method: req.Method, Path: req.URL.Path, LabelSelector: q.Get("labelSelector"), Watch: q.Get("watch") == "true"})
	return t.rt.RoundTrip(req)
}
