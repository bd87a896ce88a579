package release

import (
	"errors"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"

	"github.com/helmapp/helm-app-operator/internal/status"
)

func TestParseAnnotations(t *testing.T) {
	a, err := ParseAnnotations(map[string]string{
		AnnotationPaused: "true", AnnotationRetry: "2026-12-01",
		AnnotationInstallDisableHooks: "1", AnnotationUpgradeDisableHooks: "false", AnnotationUninstallDisableHooks: "True",
		AnnotationUpgradeForce:       "t",
		AnnotationInstallDescription: "installed by CI", AnnotationUpgradeDescription: "upgraded by CI",
		AnnotationUninstallDescription: "removed by CI", "example.com/other": "ignored",
		AnnotationUninstallOnDelete: "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Annotations{Paused: true, Retry: "2026-12-01", Helm: HelmOptions{
		InstallDisableHooks: true, UninstallDisableHooks: true, UpgradeForce: true,
		InstallDescription: "installed by CI", UpgradeDescription: "upgraded by CI", UninstallDescription: "removed by CI"}}
	if a != want {
		t.Errorf("ParseAnnotations = %+v, want %+v", a, want)
	}

	// The options reach the Helm actions.
	i, u, un, ri := &action.Install{}, &action.Upgrade{}, &action.Uninstall{}, &action.Upgrade{}
	a.Helm.install(i)
	a.Helm.upgrade(u)
	a.Helm.uninstall(un)
	a.Helm.retryInstall(ri)
	if !i.DisableHooks || i.Description != "installed by CI" || u.DisableHooks || !u.Force || u.Description != "upgraded by CI" ||
		!un.DisableHooks || un.Description != "removed by CI" || !ri.DisableHooks || ri.Force || ri.Description != "installed by CI" {
		t.Errorf("options not passed: install %+v upgrade %+v uninstall %+v retry-install %+v", i, u, un, ri)
	}

	if a, err := ParseAnnotations(nil); err != nil || a != (Annotations{UninstallOnDelete: true}) {
		t.Errorf("no annotations: %+v %v", a, err)
	}
}

func TestParseAnnotationsRejectsBadBooleans(t *testing.T) {
	for name, v := range map[string]string{
		AnnotationPaused: "yes", AnnotationUpgradeForce: "", AnnotationUninstallOnDelete: "nope", AnnotationInstallDisableHooks: "on",
		AnnotationUpgradeDisableHooks: "TRUE ", AnnotationUninstallDisableHooks: "2",
	} {
		_, err := ParseAnnotations(map[string]string{name: v, AnnotationRetry: "x"})
		var e *Error
		if !errors.As(err, &e) || e.StalledReason != status.ReasonInvalidAnnotation || e.Reason != status.ReasonInvalidAnnotation {
			t.Errorf("%s=%q: error %v is not stalled with InvalidAnnotation", name, v, err)
			continue
		}
		if msg := e.Error(); !strings.Contains(msg, name) || !strings.Contains(msg, `"`+v+`"`) || strings.Contains(msg, "\n") {
			t.Errorf("%s=%q: message %q does not name the annotation and its value on one line", name, v, msg)
		}
	}
}
