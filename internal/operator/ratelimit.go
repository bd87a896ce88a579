package operator

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// flowSchemaHeader is set on a response by an API server that applies API
// priority and fairness (APF) to requests: the UID of the FlowSchema that
// classified the request (k8s.io/api/flowcontrol/v1's
// ResponseHeaderMatchedFlowSchemaUID). Long-running requests such as
// watches are not classified and carry none.
const flowSchemaHeader = "X-Kubernetes-PF-FlowSchema-UID"

// withRateLimits returns restConfig limited on the client side to qps
// requests per second with bursts of burst (main.go's --kube-api-qps and
// --kube-api-burst), or restConfig itself when qps is 0: then the limit is
// the caller's (controller-runtime's GetConfig sets none, and the API
// server's priority and fairness paces the operator). The limit is one token
// bucket for the whole process: every client built from the returned config
// or a copy of it (the manager's cache and client, the readers, each
// resource's Helm clients) draws from it, so the flags bound what the
// operator sends, not what each of its clients does.
//
// With liftUnderAPF (the limits are main.go's defaults, no flag chose them)
// the bucket is lifted for good at the first response that shows the API
// server applies priority and fairness: from then on the API server paces
// the operator, as SIG API Machinery advises and controller-runtime does by
// default since 2025 (kubernetes-sigs/controller-runtime#3119); an API server without it keeps the limit. Limits a
// user chose are always kept.
func withRateLimits(restConfig *rest.Config, qps float32, burst int, liftUnderAPF bool, log logr.Logger) (*rest.Config, error) {
	if err := ValidateRateLimits(qps, burst); err != nil {
		return nil, err
	}
	if qps == 0 {
		return restConfig, nil
	}
	limited := rest.CopyConfig(restConfig)
	limited.QPS, limited.Burst = qps, burst
	bucket := flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	if !liftUnderAPF {
		limited.RateLimiter = bucket
		return limited, nil
	}
	l := &liftableLimiter{bucket: bucket, log: log}
	limited.RateLimiter = l
	limited.Wrap(func(rt http.RoundTripper) http.RoundTripper { return apfTransport{rt: rt, l: l} })
	return limited, nil
}

// liftableLimiter is a token bucket until lift is called, then no limit.
type liftableLimiter struct {
	bucket flowcontrol.RateLimiter
	lifted atomic.Bool
	log    logr.Logger
}

func (l *liftableLimiter) lift(flowSchema string) {
	if l.lifted.CompareAndSwap(false, true) {
		l.log.Info("client-side rate limit lifted: the API server applies priority and fairness",
			"defaultQPS", l.bucket.QPS(), "flowSchemaUID", flowSchema)
	}
}

func (l *liftableLimiter) TryAccept() bool {
	return l.lifted.Load() || l.bucket.TryAccept()
}

func (l *liftableLimiter) Accept() {
	if !l.lifted.Load() {
		l.bucket.Accept()
	}
}

func (l *liftableLimiter) Stop() { l.bucket.Stop() }

// QPS is the limit in force: 0 once lifted.
func (l *liftableLimiter) QPS() float32 {
	if l.lifted.Load() {
		return 0
	}
	return l.bucket.QPS()
}

func (l *liftableLimiter) Wait(ctx context.Context) error {
	if l.lifted.Load() {
		return nil
	}
	return l.bucket.Wait(ctx)
}

// apfTransport lifts l at the first response that carries flowSchemaHeader.
type apfTransport struct {
	rt http.RoundTripper
	l  *liftableLimiter
}

func (t apfTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil && !t.l.lifted.Load() {
		if fs := resp.Header.Get(flowSchemaHeader); fs != "" {
			t.l.lift(fs)
		}
	}
	return resp, err
}

// ValidateRateLimits says what is wrong with the client-side limits qps and
// burst (--kube-api-qps, --kube-api-burst), nil if nothing: both 0 (no
// client-side limit), or both positive.
func ValidateRateLimits(qps float32, burst int) error {
	switch {
	case math.IsNaN(float64(qps)) || math.IsInf(float64(qps), 0):
		return fmt.Errorf("--kube-api-qps must be a number; got %v", qps)
	case qps < 0:
		return fmt.Errorf("--kube-api-qps must be positive, or 0 for no client-side limit; got %v", qps)
	case burst < 0:
		return fmt.Errorf("--kube-api-burst must be positive; got %d", burst)
	case qps == 0 && burst > 0:
		return fmt.Errorf("--kube-api-burst %d needs --kube-api-qps: without one there is no client-side limit to burst above", burst)
	case qps > 0 && burst == 0:
		return fmt.Errorf("--kube-api-qps %v needs a positive --kube-api-burst (at least 1; e.g. twice the QPS)", qps)
	}
	return nil
}
