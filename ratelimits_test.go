package main

import "testing"

func TestRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name             string
		qpsSet, burstSet bool
		qps              float64
		burst            int
		wantQPS          float32
		wantBurst        int
	}{
		{"neither flag: the defaults", false, false, 0, 0, 400, 800},
		{"QPS alone: twice it as the burst", true, false, 50, 0, 50, 100},
		{"QPS 0 alone: no limit", true, false, 0, 0, 0, 0},
		{"burst alone: the default QPS", false, true, 0, 1000, 400, 1000},
		{"both", true, true, 0, 0, 0, 0},
		{"both, as given even when invalid", true, true, 50, 0, 50, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, b := rateLimits(tc.qpsSet, tc.burstSet, tc.qps, tc.burst)
			if q != tc.wantQPS || b != tc.wantBurst {
				t.Errorf("rateLimits = %v, %d; want %v, %d", q, b, tc.wantQPS, tc.wantBurst)
			}
		})
	}
}
