package bench

import (
	"strings"
	"testing"
)

func sampleResults(equalIsDefaults bool) Results {
	ours := OperatorRun{Operator: Ours, Setting: Defaults, Workers: 2, N: 10, Round: 1,
		AllDeployedSeconds: 2, AllReadySeconds: 2.5, QuietSeconds: 3,
		Install:        Tally{Requests: 200, Writes: 80, ByKey: map[string]int{"list secrets": 40, "patch benchapps/status": 20}},
		LatencySeconds: []float64{0.1, 0.2, 0.3}, RSSIdle: 80e6, RSSSettled: 90e6, RSSAfterSecrets: 91e6,
		NoOp: Tally{Requests: 80, Writes: 10, ByKey: map[string]int{}}, Restarted: sampleRestart(10, 5),
		InstallCost: Cost{OperatorCPUSeconds: 0.3, APIServerCPUSeconds: 0.28, EtcdCPUSeconds: 0.08, OperatorAllocBytes: 50e6, Measured: true}}
	base := OperatorRun{Operator: Baseline, Setting: Defaults, Workers: 2, N: 10, Round: 1,
		AllDeployedSeconds: 1, QuietSeconds: 5, Unsettled: []string{"no-op reconciles"},
		Install:        Tally{Requests: 100, Writes: 60, ByKey: map[string]int{"list secrets": 30, "update benchapps/status": 10}},
		LatencySeconds: []float64{1, 2, 3}, RSSIdle: 60e6, RSSSettled: 100e6, RSSAfterSecrets: 120e6,
		NoOp: Tally{Requests: 150, Writes: 10, ByKey: map[string]int{}}, Restarted: sampleRestart(300, 600),
		InstallCost: Cost{OperatorCPUSeconds: 2.95, APIServerCPUSeconds: 1, EtcdCPUSeconds: 0.2, OperatorAllocBytes: 925e6, Measured: true}}
	res := Results{Ns: []int{10}, Rounds: 1, EqualIsDefaults: equalIsDefaults, Runs: []OperatorRun{ours, base},
		Floors: []Floor{{N: 10, Round: 1, Workers: 16, Seconds: 0.5, WritesPerCR: floorWrites, Writes: 60,
			Cost: Cost{OperatorCPUSeconds: 0.026, APIServerCPUSeconds: 0.15, EtcdCPUSeconds: 0.05, OperatorAllocBytes: 1.54e6, Measured: true}}}}
	if !equalIsDefaults {
		ours.Workers = 16
		res.Runs[0] = ours
		eq := ours
		eq.Setting, eq.Workers, eq.AllDeployedSeconds, eq.Restarted = Equal, 2, 0.5, nil
		res.Runs = append(res.Runs, eq)
	}
	return res
}

func TestRenderTable(t *testing.T) {
	var b strings.Builder
	if err := Render(&b, sampleResults(true)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"N = 10, defaults = equal concurrency (ours 2 workers, baseline 2 workers; median of 1 round(s))",
		"| time to all Ready | 2.5 s | — | — | 5.00 | — |", // the baseline has no Ready
		"| time to all Deployed | 2.0 s | 1.0 s | 2.00 | 4.00 | 2.00 |",
		"| time to the last install request | 3.0 s | 5.0 s | 0.60 | 6.00 | 10.00 |",
		"Warning: baseline (round 1) was still making requests when the benchmark stopped waiting after: no-op reconciles; those counts may be short.",
		"| API requests per resource | 20.0 | 10.0 | 2.00 | 3.33 | 1.67 |", // floor: 6 per resource
		"| writes per resource | 8.0 | 6.0 | 1.33 | 1.33 | 1.00 |",
		"| status writes per install | 2.0 | 1.0 | 2.00 | 2.00 | 1.00 |",
		"| spec change to status, p50 | 200 ms | 2000 ms | 0.10 | — | — |",
		"| no-op reconcile: writes per resource | 1.0 | 1.0 | 1.00 | — | — |",
		"| RSS after the unrelated Secrets | 91 MB | 120 MB | 0.76 | — | — |",
		"| install: operator CPU per resource | 30.0 ms | 295.0 ms | 0.10 | 11.54 | 113.46 |",
		"| install: API server CPU per resource | 28.0 ms | 100.0 ms | 0.28 | 1.87 | 6.67 |",
		"| install: etcd CPU per resource | 8.0 ms | 20.0 ms | 0.40 | 1.60 | 4.00 |",
		"| install: operator allocation per resource | 5.00 MB | 92.50 MB | 0.05 | 32.47 | 600.65 |",
		"| list secrets | 4.00 | 3.00 |",
		"| patch benchapps/status | 2.00 | 0.00 |",
		"| update benchapps/status | 0.00 | 1.00 |",
		"Floor: 6 writes per resource by a plain client with 16 workers: 0.5 s.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "N = 10, equal concurrency") {
		t.Error("a separate equal-concurrency table although the defaults are equal")
	}
}

func TestRenderEqualConcurrencyTable(t *testing.T) {
	var b strings.Builder
	if err := Render(&b, sampleResults(false)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"N = 10, defaults (ours 16 workers, baseline 2 workers;",
		"N = 10, equal concurrency (ours 2 workers, baseline 2 workers;",
		"| time to all Deployed | 0.5 s | 1.0 s | 0.50 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
