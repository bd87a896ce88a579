package storage_test

import (
	"context"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/helmapp/helm-app-operator/internal/storage"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// The size the operator measures a revision by, before Helm stores it, is
// the size of the data Helm's Secrets driver writes for it: what the API
// server's 1 MiB bound applies to.
func TestEncodedSizeIsWhatHelmStores(t *testing.T) {
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "encoded-size")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := helmtime.Now()
	rel := &release.Release{Name: "web", Namespace: ns, Version: 1,
		Chart:    &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "0.1.0", APIVersion: "v2"}},
		Config:   map[string]any{"note": strings.Repeat("a quite compressible note ", 4000)},
		Manifest: strings.Repeat("apiVersion: v1\nkind: ConfigMap\n", 2000),
		Info:     &release.Info{Status: release.StatusDeployed, FirstDeployed: now, LastDeployed: now}}
	if err := driver.NewSecrets(cs.CoreV1().Secrets(ns)).Create("sh.helm.release.v1.web.v1", rel); err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), "sh.helm.release.v1.web.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := storage.EncodedSize(rel)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(s.Data["release"]); got != want || len(s.Data) != 1 {
		t.Errorf("measured %d bytes, Helm stored %d in %d data keys", got, want, len(s.Data))
	}
}
