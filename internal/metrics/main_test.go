package metrics_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// cfg is the admin config of the local cluster the tests share.
var cfg *rest.Config

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.StartControlPlane, func(c *controlplane.ControlPlane) { cfg = c.Config })
}
