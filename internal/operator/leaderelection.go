package operator

import (
	"fmt"
	"time"
)

// controller-runtime's leader election timings, used for the ones left zero.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// validateLeaderElection says what is wrong with the leader election
// timings (--leader-election-lease-duration, --leader-election-renew-deadline,
// --leader-election-retry-period), nil if nothing, with zero meaning
// controller-runtime's default. client-go refuses the same timings, but only
// when the manager starts, in words that name none of the flags.
//
// A standby takes over a leader that died without releasing its Lease (a
// SIGKILL, a node failure) at most a lease duration and a retry period after
// the leader's last renewal; a leader that cannot renew within the renew
// deadline stops (the process exits), so that two never reconcile at once.
func validateLeaderElection(lease, renew, retry time.Duration) error {
	if lease < 0 || renew < 0 || retry < 0 {
		return fmt.Errorf("--leader-election-lease-duration (%s), --leader-election-renew-deadline (%s) and --leader-election-retry-period (%s) must not be negative", lease, renew, retry)
	}
	lease, renew, retry = orDefault(lease, defaultLeaseDuration), orDefault(renew, defaultRenewDeadline), orDefault(retry, defaultRetryPeriod)
	switch {
	case lease <= renew:
		return fmt.Errorf("--leader-election-lease-duration (%s) must be longer than --leader-election-renew-deadline (%s)", lease, renew)
	case float64(renew) <= 1.2*float64(retry):
		// client-go's JitterFactor: a renewal is retried up to 1.2 retry periods apart.
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be longer than 1.2 × --leader-election-retry-period (%s)", renew, retry)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// positive is a pointer to d, or nil (controller-runtime's default) for 0.
func positive(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
