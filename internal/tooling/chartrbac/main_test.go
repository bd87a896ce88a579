package chartrbac

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// cfg is the admin config of the kube-apiserver (RBAC authorizer on) the
// package's tests share: the table of kinds is checked against its
// discovery, and the generated rules against its authorizer.
var cfg *rest.Config

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.StartAPIServer, func(cp *controlplane.ControlPlane) { cfg = cp.Config })
}
