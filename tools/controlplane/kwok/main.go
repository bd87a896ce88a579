// Command kwok is the kwok controller (fake nodes and pod lifecycle without a
// kubelet), built from the sigs.k8s.io/kwok module pinned in this directory's
// go.mod.
//
// It lives in its own module because kwok v0.7.0 is built against
// k8s.io v0.33 libraries, which k8s.io/kubernetes v1.36.3 would replace.
package main

import (
	"os"

	"github.com/spf13/pflag"

	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	os.Exit(run())
}

func run() int {
	// Logging and --config flags are parsed before the command tree exists,
	// because the command is built from the loaded configuration; unknown
	// flags are left for the command itself.
	global := pflag.NewFlagSet("global", pflag.ContinueOnError)
	global.ParseErrorsWhitelist.UnknownFlags = true
	global.Usage = func() {}

	ctx, logger := log.InitFlags(signals.SetupSignalContext(), global)
	ctx, err := config.InitFlags(ctx, global)
	if err != nil {
		_, _ = os.Stderr.WriteString(global.FlagUsages())
		logger.Error("loading kwok configuration", err)
		return 1
	}

	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(global)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("kwok exited", err)
		return 1
	}
	return 0
}
