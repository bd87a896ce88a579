package reconciler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testutil"
)

// One control plane for the package; each test works in its own namespace
// with its own operator.
var (
	cp  *controlplane.ControlPlane
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	var err error
	cp, err = testutil.StartControlPlane(filepath.Join("testdata", "crds"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		os.Exit(1)
	}
	cfg = cp.Config
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}
