package ship_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// cfg and kubeconfig are the admin identity of the local cluster (with
// kube-controller-manager, kube-scheduler and kwok, so that the samples'
// Deployments become Available) every test here shares.
var (
	cfg        *rest.Config
	kubeconfig string
)

func TestMain(m *testing.M) {
	// opm's bundle parser logs every optional file a bundle does not have.
	logrus.SetLevel(logrus.WarnLevel)
	cp, err := testutil.StartControlPlane()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		os.Exit(1)
	}
	cfg, kubeconfig = cp.Config, cp.KubeconfigPath
	code := m.Run()
	shipped.cleanup()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}
