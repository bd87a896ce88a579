// Command gencrd writes the CustomResourceDefinition of every kind in
// watches.yaml into config/crd/bases, from the chart's values.schema.json (or,
// for a chart without one, its values.yaml) and the operator's status
// contract (see internal/tooling/crdgen). It prints on stderr a note for each
// value the CRD checks less strictly than Helm; notes are not errors.
//
//	go run ./hack/gencrd                 # regenerate
//	go run ./hack/gencrd --check         # exit 1 if a file is stale
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"

	"github.com/helmapp/helm-app-operator/internal/tooling/crdgen"
)

func main() {
	watchesPath := flag.String("watches", "watches.yaml", "watches file listing the kinds and their charts (chart paths are relative to the working directory)")
	out := flag.String("out", "config/crd/bases", "directory of the generated CRDs")
	check := flag.Bool("check", false, "write nothing; exit 1 listing the files that would change")
	flag.Parse()

	if err := run(*watchesPath, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "gencrd:", err)
		os.Exit(1)
	}
}

func run(watchesPath, out string, check bool) error {
	ws, err := watches.Load(watchesPath)
	if err != nil {
		return err
	}
	files, err := crdgen.Generate(ws)
	if err != nil {
		return err
	}
	// What each CRD checks less strictly than the chart's Helm schema: for
	// the author to read, not an error.
	for _, w := range ws {
		notes, err := crdgen.SpecNotes(w.Chart)
		if err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(os.Stderr, "gencrd: note: %s (%s): %s\n", w.Kind, w.ChartPath, n)
		}
	}
	changed, err := crdgen.Sync(out, files, check)
	if err != nil {
		return err
	}
	if check && len(changed) > 0 {
		for _, p := range changed {
			fmt.Fprintln(os.Stderr, p)
		}
		return fmt.Errorf("%d CRD file(s) out of date; run: go run ./hack/gencrd", len(changed))
	}
	for _, p := range changed {
		fmt.Println("wrote", p)
	}
	return nil
}
