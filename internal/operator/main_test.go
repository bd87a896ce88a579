package operator_test

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/helmapp/helm-app-operator/internal/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testutil"
)

// cfg is the admin config of the control plane every test here shares; each
// test works in its own namespace.
var (
	cfg *rest.Config
	cp  *controlplane.ControlPlane
)

func TestMain(m *testing.M) {
	var err error
	cp, err = testutil.StartControlPlane()
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
