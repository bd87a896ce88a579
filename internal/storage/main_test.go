package storage_test

import (
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
	testutil.Main(m, testutil.StartControlPlane, func(c *controlplane.ControlPlane) { cp, cfg = c, c.Config })
}
