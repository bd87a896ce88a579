// Command genbundle writes the operator's OLM bundle (bundle/ and
// bundle.Dockerfile) from config/, as operator-sdk's `generate bundle` would,
// then validates it as `operator-sdk bundle validate --select-optional
// suite=operatorframework` would. Any error or warning fails it. See package
// internal/tooling/bundle.
//
//	go run ./hack/genbundle --version 0.1.0 --image quay.io/helmapp/helm-app-operator:0.1.0
//	go run ./hack/genbundle --version 0.2.0 --image ... --replaces helm-app-operator.v0.1.0 --image-digests digests.yaml
//	go run ./hack/genbundle --version 0.1.0 --image ... --variant tenancy   # or service-accounts (docs/tenancy.md)
//	go run ./hack/genbundle --validate-only
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

func main() {
	var opts bundle.Options
	var channels, k8sVersion, digests string
	var validateOnly bool
	flag.StringVar(&opts.Root, "root", ".", "The checkout: config/, watches.yaml and helm-charts/ are read from it, bundle/ and bundle.Dockerfile written to it.")
	flag.StringVar(&opts.Version, "version", "", "The operator's semantic version (without a leading v).")
	flag.StringVar(&opts.Image, "image", "", "The operator's image.")
	flag.StringVar(&channels, "channels", "candidate", "Comma-separated channels the bundle is published in.")
	flag.StringVar(&opts.DefaultChannel, "default-channel", "", "The package's default channel; the first channel when empty.")
	flag.StringVar(&opts.OpenShiftVersions, "openshift-versions", "v4.17", "The com.redhat.openshift.versions annotation; empty omits it.")
	flag.StringVar(&k8sVersion, "k8s-version", bundle.DefaultK8sVersion, "Kubernetes version the deprecated-API checks look ahead to.")
	flag.StringVar(&opts.Replaces, "replaces", "", "The CSV this version upgrades (spec.replaces), e.g. helm-app-operator.v0.1.0; empty for none.")
	flag.StringVar(&opts.SkipRange, "skip-range", "", "The olm.skipRange annotation, e.g. '>=0.1.0 <0.2.0'; empty for none.")
	flag.StringVar(&digests, "image-digests", "", "A YAML file mapping every image (as config/ names it) to its digest (sha256:...); the bundle then refers to digests only.")
	var tenancy bool
	flag.BoolVar(&tenancy, "tenancy", false, "Same as --variant tenancy.")
	flag.StringVar(&opts.Variant, "variant", "", "Generate a variant (docs/tenancy.md) from config/<variant> instead of config/default: tenancy (the charts' kinds read only, impersonate on serviceaccounts, --service-accounts=required) or service-accounts (impersonate on serviceaccounts, --service-accounts=allowed); empty for the default, which impersonates no one.")
	flag.BoolVar(&validateOnly, "validate-only", false, "Only validate the bundle already in bundle/.")
	flag.Parse()

	if tenancy {
		opts.Variant = bundle.VariantTenancy
	}
	if !validateOnly {
		opts.Channels = strings.Split(channels, ",")
		opts.CreatedAt = time.Now()
		if digests != "" {
			m, err := bundle.ReadDigests(digests)
			if err != nil {
				fail(err)
			}
			opts.ImageDigests = m
		}
		files, err := bundle.Generate(opts)
		if err != nil {
			fail(err)
		}
		if err := files.Write(opts.Root); err != nil {
			fail(err)
		}
		fmt.Printf("wrote %d files: %s/ and %s\n", len(files), bundle.BundleDir, bundle.DockerfilePath)
	}

	dir := filepath.Join(opts.Root, bundle.BundleDir)
	report, err := bundle.Validate(dir, k8sVersion)
	if err != nil {
		fail(err)
	}
	for _, e := range report.Errors {
		fmt.Println("ERROR:", e)
	}
	for _, w := range report.Warnings {
		fmt.Println("WARNING:", w)
	}
	fmt.Printf("%s: %d errors, %d warnings (operator-framework/api validators: default + operatorframework suite, k8s-version %s)\n",
		dir, len(report.Errors), len(report.Warnings), k8sVersion)
	if len(report.Errors)+len(report.Warnings) > 0 {
		os.Exit(1)
	}
}

// fail prints err on one line to stderr and exits non-zero.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}
