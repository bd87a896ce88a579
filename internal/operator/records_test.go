package operator_test

import (
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// storedRelease is a release as Helm stores it: the echo chart whole, values,
// a manifest and a hook that ran (internal/storage's tests make the same,
// with a big variant).
func storedRelease(t *testing.T, name string, version int, status release.Status, _ bool) *release.Release {
	t.Helper()
	ch, err := loader.Load(filepath.Join(tu.RepoRoot(), "helm-charts", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	at := helmtime.Time{Time: time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC)}
	manifest := "---\n# Source: echo/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	return &release.Release{
		Name: name, Namespace: "somewhere", Version: version, Chart: ch,
		Config:   map[string]any{"message": "héllo \u2603 <&>", "replicas": 3, "nested": map[string]any{"on": true}},
		Manifest: manifest,
		Info: &release.Info{FirstDeployed: at, LastDeployed: at, Status: status, Description: "Install complete",
			Notes: "Thank you for installing echo."},
		Hooks: []*release.Hook{{Name: name + "-check", Kind: "Pod", Path: "echo/templates/check.yaml",
			Manifest: "apiVersion: v1\nkind: Pod\n", Events: []release.HookEvent{release.HookPostInstall},
			LastRun:        release.HookExecution{StartedAt: at, CompletedAt: at, Phase: release.HookPhaseSucceeded},
			DeletePolicies: []release.HookDeletePolicy{release.HookBeforeHookCreation}}},
		Labels: map[string]string{"helmapp.io/chart-digest": "0123abcd", "team": "web"},
	}
}

func secretsClient(t *testing.T, ns string) corev1client.SecretInterface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().Secrets(ns)
}
