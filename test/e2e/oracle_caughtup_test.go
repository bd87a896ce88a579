//go:build e2e

package e2e

import (
	"syscall"
	"testing"
	"time"
)

// TestOracleWaitsForAStatusToCatchUp: the oracle does not take a status the
// cluster already contradicts for a settled one. A Deployment of the
// release is scaled by hand while kube-controller-manager is stopped (as one
// lags while its watches come back after an API server restart: the soak's
// seed 652150760, step 5): the Deployment is not Current until the
// controller manager runs again, so the resource cannot truthfully be
// Ready before that, whatever the status said a moment earlier. The oracle
// must settle only after the controller manager resumed; before it waited
// for its status to catch up, it took the old Ready=True for settled and
// failed a second later on the operator's truthful Ready=False.
func TestOracleWaitsForAStatusToCatchUp(t *testing.T) {
	e := newEnv(t, "e2e-oracle-caughtup", watchOptions{})
	e.applyNginx("web", nginxPage("one"))
	e.waitServing("web", "", "one")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})

	kcm := suite.cp.ControllerManagerPID()
	if kcm == 0 {
		t.Fatal("no kube-controller-manager in the e2e control plane")
	}
	if err := syscall.Kill(kcm, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(kcm, syscall.SIGCONT) })
	const stopped = 5 * time.Second
	resumed := make(chan struct{})
	go func() {
		time.Sleep(stopped)
		_ = syscall.Kill(kcm, syscall.SIGCONT)
		close(resumed)
	}()
	e.kubectl("scale", "deployment", "-l", "app.kubernetes.io/instance=web", "--replicas=3")
	e.checkOracle(oracleOptions{secrets: []string{specSecret}})
	select {
	case <-resumed:
	default:
		t.Fatalf("the oracle settled while kube-controller-manager was stopped, on a Deployment it had not seen scaled")
	}
}
