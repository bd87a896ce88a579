package operator

import (
	"strings"
	"testing"
	"time"
)

func TestValidateLeaderElection(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		want                string // "" for valid
	}{
		{0, 0, 0, ""},
		{8 * s, 6 * s, s, ""},
		{30 * s, 0, 0, ""}, // the default renew deadline 10s and retry period 2s
		{5 * s, 0, 0, "must be longer than --leader-election-renew-deadline (10s)"}, // against the default
		{6 * s, 6 * s, s, "must be longer than --leader-election-renew-deadline (6s)"},
		{8 * s, 2 * s, 2 * s, "must be longer than 1.2 × --leader-election-retry-period (2s)"},
		{-s, 0, 0, "must not be negative"},
	} {
		err := validateLeaderElection(tc.lease, tc.renew, tc.retry)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s/%s/%s: %v, want valid", tc.lease, tc.renew, tc.retry, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s/%s/%s: %v, want an error containing %q", tc.lease, tc.renew, tc.retry, err, tc.want)
		}
	}
	if positive(0) != nil || *positive(3 * s) != 3*s {
		t.Error("positive: want nil for 0 (controller-runtime's default), else the duration")
	}
}
