// Command chart makes a Helm chart a kind of this operator, or takes a kind
// away (see internal/tooling/chartkit and docs/your-chart.md):
//
//	go run ./hack/chart add --chart SRC [--name NAME] [--chart-version V] --kind KIND [--group GROUP] [--api-version v1alpha1] [--plain-http] [--root DIR]
//	go run ./hack/chart remove --kind KIND [--root DIR]
//
// SRC is a chart directory, a .tgz, oci://HOST/REPO/NAME (with
// --chart-version) or a chart repository's URL (with --name and
// --chart-version). It exits 0 with a report on stdout, or 1 with one line
// on stderr.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/helmapp/helm-app-operator/internal/tooling/chartkit"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

const usage = "usage: chart add --chart SRC --kind KIND [flags] | chart remove --kind KIND [--root DIR]"

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	fs := flag.NewFlagSet("chart "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the project's root directory")
	kind := fs.String("kind", "", "the kind (CamelCase), e.g. SealedSecrets")
	switch args[0] {
	case "add":
		var o chartkit.Options
		fs.StringVar(&o.Chart, "chart", "", "a chart directory, a .tgz, oci://HOST/REPO/NAME or a chart repository URL")
		fs.StringVar(&o.Name, "name", "", "the chart's name in the repository (with a repository URL)")
		fs.StringVar(&o.Version, "chart-version", "", "the chart's version (required for OCI and repositories)")
		fs.StringVar(&o.Group, "group", "", "the API group; without a dot the PROJECT domain is appended (default: the kind's own if it exists, else the chart's name)")
		fs.StringVar(&o.APIVersion, "api-version", "", "the API version (default: the kind's own if it exists, else "+chartkit.DefaultAPIVersion+")")
		fs.StringVar(&o.CRDs, "crds", "", "where the chart's crds/ go: "+chartkit.CRDsOperator+" (the operator applies them; default for a new kind) or "+chartkit.CRDsBundle+" (they ship with the operator, installed by make install or OLM); default: the kind's current choice")
		fs.BoolVar(&o.PlainHTTP, "plain-http", false, "talk to the OCI registry over plain HTTP")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		o.Root, o.Kind, o.Log = *root, *kind, stderr
		rep, err := chartkit.Add(o)
		if err != nil {
			return err
		}
		rep.Print(stdout)
		return nil
	case "remove":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		rep, err := chartkit.Remove(*root, *kind)
		if err != nil {
			return err
		}
		rep.Print(stdout)
		return nil
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}
