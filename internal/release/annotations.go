package release

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/action"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Annotations a user sets on a resource to steer its release. The
// helm.sdk.operatorframework.io ones are operator-sdk's, with the same meaning.
const (
	// AnnotationPaused "true" stops every Helm action on the resource.
	AnnotationPaused = "helmapp.io/paused"
	// AnnotationRetry set to a new value asks for a fresh attempt with a fresh
	// retry budget.
	AnnotationRetry = "helmapp.io/retry"
	// AnnotationUninstallOnDelete "false" lets a deleted resource go without
	// uninstalling its release: its history and its objects stay.
	AnnotationUninstallOnDelete = "helmapp.io/uninstall-on-delete"
	// AnnotationTest set to a new value runs the chart's test hooks again
	// (watches.yaml test.enable).
	AnnotationTest = "helmapp.io/test"

	AnnotationInstallDisableHooks   = "helm.sdk.operatorframework.io/install-disable-hooks"
	AnnotationUpgradeDisableHooks   = "helm.sdk.operatorframework.io/upgrade-disable-hooks"
	AnnotationUninstallDisableHooks = "helm.sdk.operatorframework.io/uninstall-disable-hooks"
	AnnotationUpgradeForce          = "helm.sdk.operatorframework.io/upgrade-force"
	AnnotationInstallDescription    = "helm.sdk.operatorframework.io/install-description"
	AnnotationUpgradeDescription    = "helm.sdk.operatorframework.io/upgrade-description"
	AnnotationUninstallDescription  = "helm.sdk.operatorframework.io/uninstall-description"
)

// Annotations is what a resource's annotations ask of the operator.
type Annotations struct {
	// Paused: no Helm action runs while true.
	Paused bool
	// Retry is the value of AnnotationRetry, empty when unset.
	Retry string
	// Test is the value of AnnotationTest, empty when unset.
	Test string
	// UninstallOnDelete is false when AnnotationUninstallOnDelete says so.
	UninstallOnDelete bool
	// Helm are the options of the Helm actions.
	Helm HelmOptions
}

// HelmOptions are the per-resource options of the Helm actions.
type HelmOptions struct {
	InstallDisableHooks, UpgradeDisableHooks, UninstallDisableHooks bool
	UpgradeForce                                                    bool
	InstallDescription, UpgradeDescription, UninstallDescription    string
}

// ParseAnnotations reads the annotations the operator knows; others are
// ignored. A boolean annotation whose value strconv.ParseBool does not accept
// is an *Error stalled with InvalidAnnotation that names it and its value:
// guessing what the user meant could run hooks they wanted off.
func ParseAnnotations(ann map[string]string) (Annotations, error) {
	a := Annotations{Retry: ann[AnnotationRetry], Test: ann[AnnotationTest], UninstallOnDelete: true}
	a.Helm.InstallDescription = ann[AnnotationInstallDescription]
	a.Helm.UpgradeDescription = ann[AnnotationUpgradeDescription]
	a.Helm.UninstallDescription = ann[AnnotationUninstallDescription]
	bools := map[string]*bool{
		AnnotationPaused:                &a.Paused,
		AnnotationUninstallOnDelete:     &a.UninstallOnDelete,
		AnnotationInstallDisableHooks:   &a.Helm.InstallDisableHooks,
		AnnotationUpgradeDisableHooks:   &a.Helm.UpgradeDisableHooks,
		AnnotationUninstallDisableHooks: &a.Helm.UninstallDisableHooks,
		AnnotationUpgradeForce:          &a.Helm.UpgradeForce,
	}
	// In name order, so that the same annotations always give the same message.
	names := make([]string, 0, len(bools))
	for name := range bools {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v, ok := ann[name]
		if !ok {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Annotations{}, &Error{Reason: status.ReasonInvalidAnnotation, StalledReason: status.ReasonInvalidAnnotation,
				Summary: fmt.Sprintf("The annotation %s has the value %q, which is not a boolean: set it to \"true\" or \"false\", or remove it", name, v)}
		}
		*bools[name] = b
	}
	return a, nil
}

func (o HelmOptions) install(i *action.Install) {
	i.DisableHooks = o.InstallDisableHooks
	i.Description = o.InstallDescription
}

// retryInstall sets the options of the upgrade that installs again over a
// failed install: for the user it is an install.
func (o HelmOptions) retryInstall(u *action.Upgrade) {
	u.DisableHooks = o.InstallDisableHooks
	u.Description = o.InstallDescription
}

func (o HelmOptions) upgrade(u *action.Upgrade) {
	u.DisableHooks = o.UpgradeDisableHooks
	u.Force = o.UpgradeForce
	u.Description = o.UpgradeDescription
}

func (o HelmOptions) uninstall(u *action.Uninstall) {
	u.DisableHooks = o.UninstallDisableHooks
	u.Description = o.UninstallDescription
}

// Annotation prefixes: every annotation under them may change what the
// operator does with a resource (see SteeringAnnotations).
const (
	prefixSDK     = "helm.sdk.operatorframework.io/"
	prefixHelmApp = "helmapp.io/"
)

// SteeringAnnotations returns, in one canonical string, the annotations that
// may change the operator's verdict on a resource: those of the
// helm.sdk.operatorframework.io/ and helmapp.io/ prefixes, known or not,
// except AnnotationRetry, which asks for an attempt by a new value alone.
// Two resources' strings are equal when those annotations are.
func SteeringAnnotations(ann map[string]string) string {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if k != AnnotationRetry && (strings.HasPrefix(k, prefixSDK) || strings.HasPrefix(k, prefixHelmApp)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, ann[k])
	}
	return b.String()
}
