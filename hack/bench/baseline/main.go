// Command baseline is the benchmark's reference operator: helm-operator-plugins
// v0.9.1's own pkg/reconciler wired to a watches file the way that library's
// helm-operator `run` command wires it, with its defaults (a reconcile period
// of one minute, runtime.NumCPU() workers). It exists only for `make bench`;
// nothing of it is part of the product's binary.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/annotation"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	watchesFile := flag.String("watches-file", "./watches.yaml", "Path to the watches file.")
	period := flag.Duration("reconcile-period", time.Minute, "Default reconcile period for controllers.")
	workers := flag.Int("max-concurrent-reconciles", runtime.NumCPU(), "Maximum number of concurrent reconciles for controllers.")
	// Not the library's: the benchmark reads the process' allocation here.
	pprofAddr := flag.String("pprof-bind-address", "0", "Address Go's /debug/pprof profiles are served on; \"0\" disables them.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(*watchesFile, *period, *workers, *pprofAddr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(watchesFile string, period time.Duration, workers int, pprofAddr string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       pprofAddr,
	})
	if err != nil {
		return err
	}
	ws, err := watches.Load(watchesFile)
	if err != nil {
		return err
	}
	for _, w := range ws {
		n := workers
		if w.MaxConcurrentReconciles != nil {
			n = *w.MaxConcurrentReconciles
		}
		p := period
		if w.ReconcilePeriod != nil {
			p = w.ReconcilePeriod.Duration
		}
		r, err := reconciler.New(
			reconciler.WithChart(*w.Chart),
			reconciler.WithGroupVersionKind(w.GroupVersionKind),
			reconciler.WithOverrideValues(w.OverrideValues),
			reconciler.WithSelector(*w.Selector),
			// The library's run command passes watchDependentResources here
			// unnegated; the option means the opposite, so negate it.
			reconciler.SkipDependentWatches(!*w.WatchDependentResources),
			reconciler.WithMaxConcurrentReconciles(n),
			reconciler.WithReconcilePeriod(p),
			reconciler.WithInstallAnnotations(annotation.DefaultInstallAnnotations...),
			reconciler.WithUpgradeAnnotations(annotation.DefaultUpgradeAnnotations...),
			reconciler.WithUninstallAnnotations(annotation.DefaultUninstallAnnotations...),
		)
		if err != nil {
			return fmt.Errorf("reconciler for %s: %w", w.GroupVersionKind, err)
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("controller for %s: %w", w.GroupVersionKind, err)
		}
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
