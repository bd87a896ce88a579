package image

import (
	"crypto/subtle"
	"io"
	"log"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is an in-memory OCI registry (go-containerregistry's) served on a
// loopback address: what the tests push to and pull from, and what
// `go run ./hack/registry` serves for make image-push bundle-push
// catalog-push on a machine without one.
type Registry struct {
	// Host is host:port, the registry part of image references.
	Host   string
	server *http.Server
}

// ServeRegistry serves a new empty registry on addr ("127.0.0.1:0" picks a
// free port) until Close. With a user, every request must carry that user's
// basic credentials (as ~/.docker/config.json gives them to clients).
func ServeRegistry(addr, user, password string) (*Registry, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if user != "" {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="helm-app-operator test registry"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	s := &http.Server{Handler: h}
	go func() { _ = s.Serve(l) }()
	return &Registry{Host: l.Addr().String(), server: s}, nil
}

// Close stops serving.
func (r *Registry) Close() error { return r.server.Close() }
