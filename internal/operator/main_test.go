package operator_test

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// cfg is the admin config of the control plane every test here shares; each
// test works in its own namespace.
var (
	cfg *rest.Config
	cp  *controlplane.ControlPlane
)

func TestMain(m *testing.M) {
	// The child process of TestCrashAfterTheKthWrite: no control plane of
	// its own, it writes to its parent's.
	if os.Getenv(crashChildKubeconfig) != "" {
		os.Exit(crashChild())
	}
	testutil.Main(m, testutil.StartControlPlane, func(c *controlplane.ControlPlane) { cp, cfg = c, c.Config })
}
