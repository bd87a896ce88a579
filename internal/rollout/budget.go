// Package rollout stages the upgrades that a chart change causes across the
// resources of one kind (watches.yaml rollout; docs/rollout.md): at most
// maxUnavailable of them are upgrading to the new chart, or upgraded and not
// yet Ready, at any moment, and once maxFailures have failed on it no more
// start. Its state is derived from the cluster as the manager's caches hold
// it (each resource's status and the metadata of its latest Helm release
// record), so that it survives a restart of the operator; the only state kept
// in memory is the slots reserved by upgrades that this process started and
// the cache does not show yet.
package rollout

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Budget is a kind's watch field rollout.
type Budget struct {
	// MaxUnavailable bounds the resources upgrading to the new chart or
	// upgraded and not yet Ready: a count, or a percentage of the kind's
	// resources, rounded up, at least 1.
	MaxUnavailable intstr.IntOrString
	// MaxFailures is how many resources may have failed on the new chart
	// before no more upgrades start; 0 means no bound.
	MaxFailures int
}

// DefaultBudget is the rollout of a watch that sets none: a quarter of the
// kind's resources at a time (at least one), halted at the first failure.
// A bad chart then reaches one resource, not all; a good one reaches all in
// four waves (docs/rollout.md says why).
func DefaultBudget() Budget {
	return Budget{MaxUnavailable: intstr.FromString("25%"), MaxFailures: 1}
}

// ParseMaxUnavailable reads a maxUnavailable value: a whole number of at
// least 1 or a percentage from 1% to 100%.
func ParseMaxUnavailable(v intstr.IntOrString) (intstr.IntOrString, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return v, fmt.Errorf("must be at least 1 or a percentage, got %d", v.IntVal)
		}
		return v, nil
	}
	s := v.StrVal
	if n, err := strconv.Atoi(s); err == nil {
		return ParseMaxUnavailable(intstr.FromInt32(int32(min(n, math.MaxInt32))))
	}
	p, ok := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(p)
	if !ok || err != nil {
		return v, fmt.Errorf("must be a whole number or a percentage such as 25%%, got %q", s)
	}
	if n < 1 || n > 100 {
		return v, fmt.Errorf("must be a percentage from 1%% to 100%%, got %q", s)
	}
	return intstr.FromString(strconv.Itoa(n) + "%"), nil
}

// Slots is how many of total resources may be unavailable at once: the
// count, or the percentage of total rounded up, never less than 1.
func (b Budget) Slots(total int) int {
	mu := b.MaxUnavailable
	if mu.Type == intstr.Int {
		return max(int(mu.IntVal), 1)
	}
	p, err := strconv.Atoi(strings.TrimSuffix(mu.StrVal, "%"))
	if err != nil || p >= 100 {
		return max(total, 1)
	}
	return max((total*p+99)/100, 1)
}

// Unbounded reports whether the budget stages nothing: every resource may
// upgrade at once and no failure halts it, the behaviour before the field
// existed (maxUnavailable: 100%, maxFailures: 0).
func (b Budget) Unbounded() bool {
	return b.MaxFailures == 0 && b.MaxUnavailable.Type == intstr.String && b.MaxUnavailable.StrVal == "100%"
}

// Halted reports whether failed resources halt the rollout.
func (b Budget) Halted(failed int) bool { return b.MaxFailures > 0 && failed >= b.MaxFailures }

// String is the budget as the watch would write it.
func (b Budget) String() string {
	return fmt.Sprintf("maxUnavailable %s, maxFailures %d", b.MaxUnavailable.String(), b.MaxFailures)
}
