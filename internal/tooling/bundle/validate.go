package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

// DefaultK8sVersion is the Kubernetes version the deprecated-API checks look
// ahead to: the version the project's tests run against.
const DefaultK8sVersion = "1.36"

// Report is what Validate found. A bundle fit for OperatorHub has neither.
type Report struct {
	Errors, Warnings []string
}

// Validators are the validators Validate runs: operator-sdk `bundle validate`'s
// defaults plus its `--select-optional suite=operatorframework`.
var Validators = interfaces.Validators{
	validation.ClusterServiceVersionValidator,
	validation.CustomResourceDefinitionValidator,
	validation.BundleValidator,
	validation.OperatorHubV2Validator,
	validation.StandardCapabilitiesValidator,
	validation.StandardCategoriesValidator,
	validation.AlphaDeprecatedAPIsValidator,
	validation.GoodPracticesValidator,
}

// Validate checks the bundle in dir (the directory holding manifests/ and
// metadata/) as `operator-sdk bundle validate --select-optional
// suite=operatorframework --optional-values=k8s-version=<k8sVersion>` does:
// the registry's format checks (checkFormat), then the bundle loaded with
// manifests.GetBundleFromDir through Validators. The error is for a bundle
// that cannot be read at all.
func Validate(dir, k8sVersion string) (Report, error) {
	var r Report
	r.Errors = append(r.Errors, checkFormat(dir)...)
	b, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("loading the bundle: %v", err))
		return r, nil
	}
	if b.CSV == nil {
		// Several validators dereference the CSV unchecked.
		r.Errors = append(r.Errors, "the bundle has no ClusterServiceVersion")
		return r, nil
	}
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": k8sVersion})
	for _, res := range Validators.Validate(objs...) {
		for _, e := range res.Errors {
			r.Errors = append(r.Errors, res.Name+": "+e.Error())
		}
		for _, w := range res.Warnings {
			r.Warnings = append(r.Warnings, res.Name+": "+w.Error())
		}
	}
	return r, nil
}

// checkFormat does the checks of operator-registry's ValidateBundleFormat
// that operator-framework/api lacks, and the OperatorHub pipeline's checks on
// what manifests/ holds: the annotations the registry requires with their
// values, a flat manifests/ of kinds OLM installs, no NetworkPolicy, and no
// ServiceAccount named like the one the CSV's Deployment runs as.
func checkFormat(dir string) []string {
	var errs []string
	root := filepath.Dir(dir)
	ann, err := ReadAnnotations(root)
	if err != nil {
		return []string{err.Error()}
	}
	want := map[string]string{
		KeyMediatype: "registry+v1",
		KeyManifests: "manifests/",
		KeyMetadata:  "metadata/",
	}
	for _, k := range []string{KeyMediatype, KeyManifests, KeyMetadata} {
		if ann[k] != want[k] {
			errs = append(errs, fmt.Sprintf("annotations.yaml: %s is %q, want %q", k, ann[k], want[k]))
		}
	}
	channels := strings.Split(ann[KeyChannels], ",")
	switch {
	case ann[KeyPackage] == "":
		errs = append(errs, "annotations.yaml: "+KeyPackage+" is required")
	case ann[KeyChannels] == "" || slices.Contains(channels, ""):
		errs = append(errs, "annotations.yaml: "+KeyChannels+" must be a comma-separated list of channel names")
	}
	if d, ok := ann[KeyDefaultChannel]; ok && !slices.Contains(channels, d) {
		errs = append(errs, fmt.Sprintf("annotations.yaml: default channel %q is not one of the channels %q", d, ann[KeyChannels]))
	}
	if _, err := os.Stat(filepath.Join(dir, "tests", "scorecard")); err == nil &&
		(ann[KeyTestMediatype] != "scorecard+v1" || ann[KeyTestConfig] != "tests/scorecard/") {
		errs = append(errs, "annotations.yaml: tests/scorecard needs "+KeyTestMediatype+": scorecard+v1 and "+KeyTestConfig+": tests/scorecard/")
	}

	csv, err := ReadCSV(root)
	if err != nil {
		return append(errs, err.Error())
	}
	if pkg, _, _ := strings.Cut(csv.Name, ".v"); pkg != ann[KeyPackage] {
		errs = append(errs, fmt.Sprintf("the CSV %s is not named after the package %q", csv.Name, ann[KeyPackage]))
	}
	var serviceAccounts []string
	for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		serviceAccounts = append(serviceAccounts, d.Spec.Template.Spec.ServiceAccountName)
	}

	entries, err := os.ReadDir(filepath.Join(dir, "manifests"))
	if err != nil {
		return append(errs, err.Error())
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			errs = append(errs, "manifests/"+e.Name()+": manifests/ must hold only files, no directories or dotfiles")
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, "manifests", e.Name()))
		if err != nil {
			return append(errs, err.Error())
		}
		objs, err := decodeObjects(raw)
		if err != nil || len(objs) != 1 {
			errs = append(errs, fmt.Sprintf("manifests/%s: want one object (%v)", e.Name(), err))
			continue
		}
		o := objs[0]
		switch o.GetKind() {
		case "ClusterServiceVersion", "CustomResourceDefinition":
		default:
			if err := checkShippable(o, serviceAccounts); err != nil {
				errs = append(errs, "manifests/"+e.Name()+": "+err.Error())
			}
		}
	}
	return errs
}
