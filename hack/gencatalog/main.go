// Command gencatalog writes a file-based catalog (FBC) of the operator's
// bundles and validates it with opm's library, as `opm render`, `opm init`
// and `opm validate` would. See package internal/tooling/catalog.
//
//	go run ./hack/gencatalog --bundles bundle --out catalog
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/helmapp/helm-app-operator/internal/tooling/catalog"
)

func main() {
	var bundles, out string
	var opts catalog.Options
	flag.StringVar(&bundles, "bundles", "bundle", "Comma-separated bundle directories (each with manifests/ and metadata/), one per version.")
	flag.StringVar(&out, "out", "catalog", "The catalog directory to write (replaced).")
	flag.StringVar(&opts.ImageTemplate, "image-template", catalog.DefaultImageTemplate, "The bundle image, a Go template over .Package, .Name and .Version.")
	flag.Parse()
	// opm's bundle parser logs every optional file it does not find.
	logrus.SetLevel(logrus.WarnLevel)
	opts.Bundles = strings.Split(bundles, ",")

	ctx := context.Background()
	cfg, err := catalog.Render(ctx, opts)
	if err != nil {
		fail(err)
	}
	if err := catalog.Validate(cfg); err != nil {
		fail(err)
	}
	path, err := catalog.Write(ctx, cfg, out)
	if err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s: package %s, %d channel(s), %d bundle(s); valid (operator-registry)\n",
		path, cfg.Packages[0].Name, len(cfg.Channels), len(cfg.Bundles))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
