//go:build e2e

// Package e2e runs the operator binary, as a user would, against the
// project's full local cluster (kube-apiserver, etcd, kube-controller-manager,
// kube-scheduler and kwok with one fake Node) and checks what users see in
// the custom resources' status. Run it with `make test-e2e`.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// suite is what TestMain sets up once for every test.
var suite struct {
	// root is the repository's root directory.
	root string
	// dir holds the operator binary, the cluster's work directory and one
	// directory per test (watches file, manifests, operator log). It is
	// removed after a fully successful run unless E2E_KEEP is set.
	dir string
	// manager is the operator binary built from the checkout.
	manager string
	cp      *controlplane.ControlPlane
	kube    kubernetes.Interface
	dyn     dynamic.Interface
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	// envtest logs through controller-runtime's logger; without one set, it
	// prints a stack trace ("log.SetLogger(...) was never called") into the
	// suite's output and `make olm-demo`'s.
	ctrllog.SetLogger(logr.Discard())
	_, file, _, _ := runtime.Caller(0)
	suite.root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	dir, err := os.MkdirTemp("", "helm-app-operator-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	suite.dir = dir
	code := 1
	defer func() {
		if code == 0 && os.Getenv("E2E_KEEP") == "" {
			_ = os.RemoveAll(dir)
			return
		}
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", dir)
	}()

	suite.manager = filepath.Join(dir, "manager")
	start := time.Now()
	build := exec.Command("go", "build", "-o", suite.manager, ".")
	build.Dir = suite.root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the operator:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: built the operator in %s\n", time.Since(start).Round(time.Second))

	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Full:              true,
		CRDDirectoryPaths: []string{filepath.Join(suite.root, "config", "crd", "bases")},
		WorkDir:           filepath.Join(dir, "cluster"),
		// The shard test tells the operators' requests apart by user.
		AuditLog: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the local cluster:", err)
		return 1
	}
	suite.cp = cp
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		}
	}()
	fmt.Fprintf(os.Stderr, "e2e: local cluster up in %s (kubeconfig %s)\n", time.Since(start).Round(time.Second), cp.KubeconfigPath)

	if suite.kube, err = kubernetes.NewForConfig(cp.Config); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if suite.dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code = m.Run()
	return code
}

// testDir returns a new directory for test t under the suite's directory
// (new for each run of the test, with -count).
func testDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(suite.dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}
