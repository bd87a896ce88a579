// Command bench is `make bench`: our operator and the baseline
// (hack/bench/baseline) in turn, each on a fresh local control plane, with the
// figures as a table on stdout and as JSON in a file. See docs/performance.md.
//
// Environment: BENCH_N (comma-separated resource counts, default "100,500"),
// BENCH_ROUNDS (default 1), BENCH_SMOKE=1 (N=5, one round, 50 unrelated
// Secrets, 5 spec changes: that every figure is produced, not what it is).
// For exploring: BENCH_OURS_ONLY=1 runs ours at its defaults alone (and the floor),
// BENCH_OURS_ARGS adds flags to our operator's command line (space-separated),
// BENCH_PROFILE=dir writes CPU profiles of our operator's install phase there,
// and two heap profiles bracketing it
// (profiling costs CPU: the published figures are measured without it).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/tooling/bench"
)

func main() {
	// envtest logs through controller-runtime; the progress line is enough.
	ctrllog.SetLogger(logr.Discard())
	cfg := bench.DefaultConfig()
	flag.StringVar(&cfg.OursBinary, "ours", "bin/manager", "Our operator's binary.")
	flag.StringVar(&cfg.BaselineBinary, "baseline", "bin/bench-baseline", "The baseline's binary (hack/bench/baseline).")
	out := flag.String("out", "bin/bench/results.json", "Where the raw figures are written as JSON.")
	flag.StringVar(&cfg.WorkDir, "work-dir", "bin/bench/runs", "Where each run's control plane, audit and operator logs are kept.")
	flag.Parse()
	if err := run(cfg, *out); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(cfg bench.Config, out string) error {
	if err := fromEnv(&cfg); err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	cfg.RepoRoot = root
	for _, p := range []*string{&cfg.OursBinary, &cfg.BaselineBinary, &cfg.WorkDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	cfg.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	res, err := bench.Run(ctx, cfg)
	if werr := write(out, res); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	fmt.Printf("helm-app-operator benchmark: %d CPUs, %s, load at start %s, %.0f s in all; raw figures in %s\n",
		res.Host.CPUs, res.Host.GoVersion, res.Host.LoadAvg, res.Seconds, out)
	if err := bench.Render(os.Stdout, res); err != nil {
		return err
	}
	// Every figure must have been produced (CI's smoke run relies on this).
	if cfg.OursOnly {
		return nil
	}
	if err := res.Check(cfg.Changes); err != nil {
		return fmt.Errorf("figures missing:\n%w", err)
	}
	return nil
}

func fromEnv(cfg *bench.Config) error {
	if os.Getenv("BENCH_SMOKE") == "1" {
		cfg.Ns, cfg.Rounds, cfg.UnrelatedSecrets, cfg.Changes = []int{5}, 1, 50, 5
		cfg.SteadyPeriod, cfg.SteadyPeriods = 4*time.Second, 1
	}
	if v := os.Getenv("BENCH_N"); v != "" {
		cfg.Ns = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("BENCH_N=%q: want comma-separated counts of at least 1", v)
			}
			cfg.Ns = append(cfg.Ns, n)
		}
	}
	cfg.OursOnly = os.Getenv("BENCH_OURS_ONLY") == "1"
	cfg.OursArgs = strings.Fields(os.Getenv("BENCH_OURS_ARGS"))
	if v := os.Getenv("BENCH_PROFILE"); v != "" {
		dir, err := filepath.Abs(v)
		if err != nil {
			return err
		}
		cfg.ProfileDir = dir
	}
	if v := os.Getenv("BENCH_ROUNDS"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 {
			return fmt.Errorf("BENCH_ROUNDS=%q: want a count of at least 1", v)
		}
		cfg.Rounds = r
	}
	return nil
}

func write(path string, res bench.Results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
