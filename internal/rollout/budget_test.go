package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestBudgetSlots(t *testing.T) {
	tests := []struct {
		mu    intstr.IntOrString
		total int
		want  int
	}{
		{intstr.FromString("25%"), 30, 8}, // 7.5 rounded up
		{intstr.FromString("25%"), 2, 1},  // 0.5 rounded up
		{intstr.FromString("25%"), 1, 1},
		{intstr.FromString("25%"), 0, 1}, // never less than 1
		{intstr.FromString("25%"), 4, 1},
		{intstr.FromString("25%"), 5, 2},
		{intstr.FromString("1%"), 1000, 10},
		{intstr.FromString("1%"), 1001, 11},
		{intstr.FromString("100%"), 30, 30},
		{intstr.FromInt32(5), 30, 5},
		{intstr.FromInt32(5), 3, 5},
	}
	for _, tt := range tests {
		b := Budget{MaxUnavailable: tt.mu, MaxFailures: 1}
		if got := b.Slots(tt.total); got != tt.want {
			t.Errorf("maxUnavailable %s of %d: %d slots, want %d", tt.mu.String(), tt.total, got, tt.want)
		}
	}
}

func TestParseMaxUnavailable(t *testing.T) {
	good := map[string]intstr.IntOrString{"5": intstr.FromInt32(5), "25%": intstr.FromString("25%"), "100%": intstr.FromString("100%")}
	for in, want := range good {
		got, err := ParseMaxUnavailable(intstr.Parse(in))
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "0%", "101%", "x", "5.5%", "%"} {
		if _, err := ParseMaxUnavailable(intstr.Parse(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestBudgetHaltedAndUnbounded(t *testing.T) {
	b := DefaultBudget()
	if b.Halted(0) || !b.Halted(1) {
		t.Errorf("default budget: halted at 0 %v, at 1 %v; want false, true", b.Halted(0), b.Halted(1))
	}
	if (Budget{MaxUnavailable: intstr.FromString("25%")}).Halted(100) {
		t.Errorf("maxFailures 0 halted")
	}
	if b.Unbounded() || !(Budget{MaxUnavailable: intstr.FromString("100%")}).Unbounded() {
		t.Errorf("Unbounded: only maxUnavailable 100%% with maxFailures 0")
	}
	if (Budget{MaxUnavailable: intstr.FromString("100%"), MaxFailures: 1}).Unbounded() {
		t.Errorf("maxUnavailable 100%% with maxFailures 1 still halts")
	}
}
