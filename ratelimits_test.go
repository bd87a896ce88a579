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
		wantLift         bool
	}{
		{"neither flag: the defaults, lifted under priority and fairness", false, false, 0, 0, 400, 800, true},
		{"QPS alone: twice it as the burst", true, false, 50, 0, 50, 100, false},
		{"QPS 0 alone: no limit", true, false, 0, 0, 0, 0, false},
		{"burst alone: the default QPS", false, true, 0, 1000, 400, 1000, false},
		{"both", true, true, 0, 0, 0, 0, false},
		{"both, as given even when invalid", true, true, 50, 0, 50, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, b, lift := rateLimits(tc.qpsSet, tc.burstSet, tc.qps, tc.burst)
			if q != tc.wantQPS || b != tc.wantBurst || lift != tc.wantLift {
				t.Errorf("rateLimits = %v, %d, lift %v; want %v, %d, lift %v", q, b, lift, tc.wantQPS, tc.wantBurst, tc.wantLift)
			}
		})
	}
}
