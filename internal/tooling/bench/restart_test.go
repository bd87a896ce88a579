package bench

import (
	"strings"
	"testing"
)

// sampleRestart is a RestartRun with restart requests of which writes are
// a tenth, and steady requests over two periods.
func sampleRestart(restart, steady int) *RestartRun {
	return &RestartRun{
		Restart:      Tally{Requests: restart, Writes: restart / 10, ByKey: map[string]int{"get secrets": restart / 2}},
		QuietSeconds: 4.2, PeriodSeconds: 20, Periods: 2,
		Steady: Tally{Requests: steady, ByKey: map[string]int{"list secrets": steady / 2}},
		Cost:   Cost{OperatorCPUSeconds: 0.1, APIServerCPUSeconds: 0.2, EtcdCPUSeconds: 0.05, OperatorAllocBytes: 5e6, Measured: true},
	}
}

func TestRenderRestartRows(t *testing.T) {
	var b strings.Builder
	if err := Render(&b, sampleResults(true)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| restart: requests per resource | 1.0 | 30.0 | 0.03 | — | — |",
		"|   get secrets | 0.50 | 15.00 | 0.03 | — | — |",
		"| restart: writes per resource | 0.10 | 3.00 | 0.03 | — | — |",
		"| restart: time until quiet | 4.2 s | 4.2 s | 1.00 | — | — |",
		"| restart: operator CPU per resource | 10.0 ms | 10.0 ms | 1.00 | — | — |",
		"| restart: etcd CPU per resource | 5.0 ms | 5.0 ms | 1.00 | — | — |",
		"| restart: operator allocation per resource | 500 kB | 500 kB | 1.00 | — | — |",
		"| steady state: requests per resource per period | 0.25 | 30.00 | 0.01 | — | — |",
		"|   of which secrets (list and get) | 0.10 | 15.00 | 0.01 | — | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Ours at equal concurrency runs no restart phases: its column shows none.
	b.Reset()
	if err := Render(&b, sampleResults(false)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| restart: requests per resource | — | 30.0 | — | — | — |") {
		t.Errorf("the equal-concurrency table shows restart figures for ours:\n%s", b.String())
	}
}

func TestCheckNamesMissingRestartFigures(t *testing.T) {
	res := sampleResults(true)
	res.Runs[1].Restarted = nil
	if err := res.Check(3); err == nil || !strings.Contains(err.Error(), "baseline (defaults): no restart and steady-state counts") {
		t.Errorf("Check = %v, want the missing restart figures named", err)
	}
}
