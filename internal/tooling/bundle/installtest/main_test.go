package installtest_test

import (
	"testing"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// cfg is the admin config of the control plane every test here shares; each
// test works in namespaces of its own.
var cfg *rest.Config

// globalLogs receives what client-go (klog) and controller-runtime's global
// logger write, such as an informer's failed list, which the operator's own
// logger does not see; the tests look for RBAC denials in it.
var globalLogs = &syncBuffer{}

func TestMain(m *testing.M) {
	logger := zap.New(zap.WriteTo(globalLogs), zap.Level(zapcore.DebugLevel))
	klog.SetLogger(logger)
	ctrllog.SetLogger(logger)
	testutil.Main(m, testutil.StartControlPlane, func(cp *controlplane.ControlPlane) { cfg = cp.Config })
}
