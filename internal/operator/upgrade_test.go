package operator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// TestOperatorUpgrade replaces the running operator, as OLM does when it
// upgrades the CSV, and checks what happens to the releases: a new operator
// with the same charts upgrades none of them; one whose nginx chart changed
// upgrades each Nginx release exactly once (and no Echo release); starting it
// again upgrades nothing more.
func TestOperatorUpgrade(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "opupgrade")

	// The charts the "old" operator image ships.
	oldCharts := copyCharts(t, "")
	nginxes := []string{"web-a", "web-b"}
	all := append([]string{"echo"}, nginxes...)

	stop := runOperator(t, oldCharts, ns)
	for _, n := range nginxes {
		if err := c.Create(ctx, tu.NewCR(tu.NginxGVK, ns, n, map[string]any{"replicaCount": int64(1)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "echo", nil)); err != nil {
		t.Fatal(err)
	}
	for _, n := range nginxes {
		tu.WaitForCondition(t, c, tu.NginxGVK, ns, n, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	stop()
	wantRevisions(t, ns, map[string]int{"web-a": 1, "web-b": 1, "echo": 1})

	// A new operator, same charts: every resource is reconciled, no release
	// gets a revision.
	before := reconciles(t)
	stop = runOperator(t, copyCharts(t, ""), ns)
	waitForReconciles(t, before, len(all))
	stop()
	wantRevisions(t, ns, map[string]int{"web-a": 1, "web-b": 1, "echo": 1})

	// A new operator whose nginx chart changed (a new chart version): each
	// Nginx release is upgraded to it, the Echo release is not.
	newCharts := copyCharts(t, "0.1.1")
	stop = runOperator(t, newCharts, ns)
	for _, n := range nginxes {
		tu.Eventually(t, 2*time.Minute, n+" to be upgraded to chart 0.1.1", func() (bool, string) {
			u, err := tu.Get(t, c, tu.NginxGVK, ns, n)
			if err != nil {
				return false, err.Error()
			}
			v, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "chartVersion")
			return v == "0.1.1" && tu.ConditionIs(u, status.TypeDeployed, metav1.ConditionTrue, status.ReasonUpgradeSuccessful), tu.Describe(u)
		})
	}
	stop()
	wantRevisions(t, ns, map[string]int{"web-a": 2, "web-b": 2, "echo": 1})

	// Started again with the same new charts: nothing more is upgraded.
	before = reconciles(t)
	stop = runOperator(t, newCharts, ns)
	waitForReconciles(t, before, len(all))
	stop()
	wantRevisions(t, ns, map[string]int{"web-a": 2, "web-b": 2, "echo": 1})
}

// copyCharts copies helm-charts/ into a temporary directory, as a new
// operator image would ship them; with nginxVersion, the nginx chart's
// version is changed to it. It returns a watches.yaml naming the copies.
func copyCharts(t *testing.T, nginxVersion string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(tu.RepoRoot(), "helm-charts"))); err != nil {
		t.Fatal(err)
	}
	if nginxVersion != "" {
		p := filepath.Join(dir, "nginx", "Chart.yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		changed := strings.Replace(string(b), "\nversion: 0.1.0\n", "\nversion: "+nginxVersion+"\n", 1)
		if changed == string(b) {
			t.Fatal("the nginx chart's version is not 0.1.0; update this test")
		}
		if err := os.WriteFile(p, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(tu.RepoRoot(), "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w := strings.ReplaceAll(string(raw), "chart: helm-charts/", "chart: "+dir+"/")
	p := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(p, []byte(w), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runOperator starts the operator on ns with the watches file and returns a
// function that stops it and waits until it has stopped.
func runOperator(t *testing.T, watchesPath, ns string) func() {
	t.Helper()
	ws, err := watches.Load(watchesPath)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := operator.New(cfg, operator.Config{WatchNamespaces: []string{ns}, MaxConcurrentReconciles: 2,
		ReconcilePeriod: time.Hour, MetricsBindAddress: "0", HealthProbeBindAddress: "0", SkipNameValidation: true}, ws)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("operator stopped with an error: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// reconciles returns the reconciles that ended without an error so far of the Nginx and Echo
// controllers, from controller-runtime's own metrics (the registry every
// manager of this process shares).
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["result"] != "error" && strings.HasSuffix(labels["controller"], ".web.helmapp.io") {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// waitForReconciles waits until at least n more reconciles than before have
// succeeded: a new operator reconciles every existing resource once when its
// caches sync.
func waitForReconciles(t *testing.T, before float64, n int) {
	t.Helper()
	tu.Eventually(t, 2*time.Minute, fmt.Sprintf("%d reconciles by the new operator", n), func() (bool, string) {
		got := reconciles(t) - before
		return got >= float64(n), fmt.Sprintf("%v reconciles", got)
	})
}

// wantRevisions checks each release's history in Helm's storage: its number
// of revisions, and that exactly one is deployed.
func wantRevisions(t *testing.T, ns string, want map[string]int) {
	t.Helper()
	for name, n := range want {
		h, err := helmStorage(t, ns).History(name)
		if err != nil {
			t.Errorf("history of %s: %v", name, err)
			continue
		}
		deployed := 0
		for _, r := range h {
			if r.Info.Status == "deployed" {
				deployed++
			}
		}
		if len(h) != n || deployed != 1 {
			t.Errorf("release %s has %d revisions (%d deployed), want %d (1 deployed)", name, len(h), deployed, n)
		}
	}
}
