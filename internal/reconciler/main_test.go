package reconciler_test

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// One control plane for the package; each test works in its own namespace
// with its own operator.
var (
	cp  *controlplane.ControlPlane
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.StartControlPlane, func(c *controlplane.ControlPlane) { cp, cfg = c, c.Config },
		filepath.Join("testdata", "crds"))
}
