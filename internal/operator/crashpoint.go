package operator

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// The test-only crash point (issue 28): environment variables that the
// product never sets, read once when the manager is built. Unset, nothing is
// wrapped and nothing is counted.
const (
	// CrashAfterWriteEnv, set to k > 0, makes the process SIGKILL itself
	// right after its kth write has been answered by the API server: the
	// write is done, nothing after it is.
	CrashAfterWriteEnv = "HELM_APP_OPERATOR_TEST_CRASH_AFTER_WRITE"
	// WriteLogEnv, set to a path, appends one line per write to that file
	// ("<k> <method> <path> <code>"), before any crash it causes.
	WriteLogEnv = "HELM_APP_OPERATOR_TEST_WRITE_LOG"
)

// withCrashPoint returns restConfig unchanged unless getenv sets
// CrashAfterWriteEnv or WriteLogEnv; then a copy whose every request passes
// through a crashPoint. Every client of the process is built from this
// config (the manager's, Helm's storage and kube clients, the impersonated
// ones), so the writes counted are all the operator's writes that change
// the cluster's state: Helm's release records, the release's objects (hooks
// included), the resources' status and finalizers. Events, Leases and access
// reviews are not counted (see countsAsWrite).
func withCrashPoint(restConfig *rest.Config, getenv func(string) string) (*rest.Config, error) {
	after, logPath := getenv(CrashAfterWriteEnv), getenv(WriteLogEnv)
	if after == "" && logPath == "" {
		return restConfig, nil
	}
	cp := &crashPoint{kill: killSelf}
	if after != "" {
		k, err := strconv.Atoi(after)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("%s must be a positive number, got %q", CrashAfterWriteEnv, after)
		}
		cp.after = k
	}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", WriteLogEnv, err)
		}
		cp.log = f
	}
	wrapped := rest.CopyConfig(restConfig)
	wrapped.Wrap(func(rt http.RoundTripper) http.RoundTripper { return crashTransport{rt: rt, cp: cp} })
	return wrapped, nil
}

// crashPoint counts the writes of the process, logs them and kills the
// process after the after-th (0: never).
type crashPoint struct {
	after int
	log   *os.File
	kill  func()

	mu sync.Mutex
	n  int
}

// wrote records a write answered with code; it kills the process when it
// is the after-th. The lock orders the writes in the log as they were
// counted, and holds back every other write's answer once the kill has begun.
func (cp *crashPoint) wrote(method, path string, code int) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.n++
	if cp.log != nil {
		// One write(2) per line: the line is in the file before the kill.
		_, _ = fmt.Fprintf(cp.log, "%d %s %s %d\n", cp.n, method, path, code)
	}
	if cp.n == cp.after {
		cp.kill()
	}
}

// killSelf sends SIGKILL to the process itself and waits for it.
func killSelf() {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Kill()
	}
	if err != nil {
		panic(fmt.Sprintf("%s: killing the process: %v", CrashAfterWriteEnv, err))
	}
	select {}
}

type crashTransport struct {
	rt http.RoundTripper
	cp *crashPoint
}

func (t crashTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil && countsAsWrite(req) {
		t.cp.wrote(req.Method, req.URL.Path, resp.StatusCode)
	}
	return resp, err
}

// countsAsWrite tells the requests that may change what the operator is
// judged on: creates, updates, patches and deletes, but not the events it
// records, its leader election Lease, its access and token reviews, nor a
// dry run.
func countsAsWrite(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	if req.URL.Query().Has("dryRun") {
		return false
	}
	p := req.URL.Path
	for _, skip := range []string{"/apis/coordination.k8s.io/", "/apis/authorization.k8s.io/", "/apis/authentication.k8s.io/", "/apis/events.k8s.io/"} {
		if strings.HasPrefix(p, skip) {
			return false
		}
	}
	return !strings.HasSuffix(p, "/events") && !strings.Contains(p, "/events/")
}
