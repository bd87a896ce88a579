package bench

import (
	"errors"
	"fmt"
)

// Check reports a figure the benchmark failed to produce: every N has a
// floor and a run of each operator, and every run has its times, requests,
// memory, CPU and allocation, and spec-change latencies. It says nothing about the values; CI's
// `make bench BENCH_SMOKE=1` relies on it to keep every figure working.
func (res Results) Check(changes int) error {
	var errs []error
	for _, n := range res.Ns {
		if len(floorsOf(res.Floors, n)) != res.Rounds {
			errs = append(errs, fmt.Errorf("N=%d: %d floor runs, want %d", n, len(floorsOf(res.Floors, n)), res.Rounds))
		}
		for _, op := range []string{Ours, Baseline} {
			if got := len(runsOf(res.Runs, op, Defaults, n)); got != res.Rounds {
				errs = append(errs, fmt.Errorf("N=%d: %d runs of %s at its defaults, want %d", n, got, op, res.Rounds))
			}
		}
		if !res.EqualIsDefaults {
			if got := len(runsOf(res.Runs, Ours, Equal, n)); got != res.Rounds {
				errs = append(errs, fmt.Errorf("N=%d: %d runs of ours at the baseline's concurrency, want %d", n, got, res.Rounds))
			}
		}
	}
	for _, f := range res.Floors {
		if f.Seconds <= 0 {
			errs = append(errs, fmt.Errorf("N=%d round %d: no floor time", f.N, f.Round))
		}
		for _, m := range f.Cost.missing() {
			errs = append(errs, fmt.Errorf("N=%d round %d: no floor %s", f.N, f.Round, m))
		}
	}
	for _, r := range res.Runs {
		what := fmt.Sprintf("N=%d round %d %s (%s)", r.N, r.Round, r.Operator, r.Setting)
		missing := func(cond bool, figure string) {
			if cond {
				errs = append(errs, fmt.Errorf("%s: no %s", what, figure))
			}
		}
		missing(r.AllDeployedSeconds <= 0, "time to all Deployed")
		missing(r.Operator == Ours && r.AllReadySeconds <= 0, "time to all Ready")
		missing(r.QuietSeconds <= 0, "time to the last install request")
		missing(r.Install.Requests <= 0 || r.Install.Writes <= 0, "install requests")
		missing(r.Install.StatusWrites(benchResource) <= 0, "status writes")
		missing(r.RSSIdle <= 0, "idle RSS")
		missing(r.RSSSettled <= 0, "settled RSS")
		missing(r.RSSAfterSecrets <= 0, "RSS after the unrelated Secrets")
		missing(len(r.LatencySeconds) != changes, fmt.Sprintf("%d spec-change latencies (has %d)", changes, len(r.LatencySeconds)))
		missing(r.NoOp.ByKey == nil, "no-op reconcile count")
		missing(r.Setting == Defaults && (r.Restarted == nil || r.Restarted.Restart.ByKey == nil || r.Restarted.Steady.ByKey == nil),
			"restart and steady-state counts")
		for _, m := range r.InstallCost.missing() {
			missing(true, "install "+m)
		}
		if r.Restarted != nil {
			for _, m := range r.Restarted.Cost.missing() {
				missing(true, "restart "+m)
			}
		}
	}
	return errors.Join(errs...)
}
