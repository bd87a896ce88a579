package operator

import (
	"fmt"
	"math"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// withRateLimits returns restConfig limited on the client side to qps
// requests per second with bursts of burst (main.go's --kube-api-qps and
// --kube-api-burst), or restConfig itself when qps is 0: then the limit is
// the caller's (controller-runtime's GetConfig sets none, and the API
// server's priority and fairness paces the operator). The limit is one token
// bucket for the whole process: every client built from the returned config
// or a copy of it (the manager's cache and client, the readers, each
// resource's Helm clients) draws from it, so the flags bound what the
// operator sends, not what each of its clients does.
func withRateLimits(restConfig *rest.Config, qps float32, burst int) (*rest.Config, error) {
	if err := ValidateRateLimits(qps, burst); err != nil {
		return nil, err
	}
	if qps == 0 {
		return restConfig, nil
	}
	limited := rest.CopyConfig(restConfig)
	limited.QPS, limited.Burst = qps, burst
	limited.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return limited, nil
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
