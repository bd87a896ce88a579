package main

import "math"

// The client-side rate limits when no flag sets them: the lowest of the
// benchmark's settings that did not slow it (docs/performance.md, "Client
// rate limits"): 500 installs at qps 100 took 2.7× as long as without a
// limit, at 200 1.4×, at 400 no longer (within noise). The operator's busiest
// second there was about 520 requests, its busy seconds 230 on average. They
// hold only until the API server shows that it applies priority and
// fairness, which then paces the operator (operator.Config.LiftRateLimitsUnderAPF).
const (
	defaultKubeAPIQPS   = 400
	defaultKubeAPIBurst = 800
)

// rateLimits resolves --kube-api-qps and --kube-api-burst: the defaults when
// neither is given, lifted under the API server's priority and fairness
// (lift); a QPS alone gets a burst of twice it (none for 0, which turns the
// limit off); a burst alone keeps the default QPS. Limits a flag chose are
// kept whatever the API server does. What results is checked by
// operator.ValidateRateLimits.
func rateLimits(qpsSet, burstSet bool, qps float64, burst int) (q float32, b int, lift bool) {
	switch {
	case !qpsSet && !burstSet:
		return defaultKubeAPIQPS, defaultKubeAPIBurst, true
	case qpsSet && !burstSet:
		if qps > 0 && !math.IsInf(qps, 0) {
			return float32(qps), int(math.Ceil(2 * qps)), false
		}
		return float32(qps), 0, false
	case !qpsSet:
		return defaultKubeAPIQPS, burst, false
	}
	return float32(qps), burst, false
}
