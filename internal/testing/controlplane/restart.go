package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RestartAPIServer stops kube-apiserver (killed if its graceful shutdown
// takes longer than envtest's stop timeout), waits down, and starts it again on
// the same etcd, address, serving certificate and client CA: clients (the
// kubeconfig, Config, the cluster's components) see it go away and come back
// with all its data, and need nothing new. It returns once the new process
// is healthy.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	if cp.env == nil || cp.stopped {
		return fmt.Errorf("restarting kube-apiserver: the control plane is not running")
	}
	s := cp.env.ControlPlane.APIServer
	// envtest sends SIGTERM and, when the graceful shutdown outlasts its stop
	// timeout (requests under way), SIGKILL, returning this error: the
	// process is gone either way, as after a crash.
	if err := s.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	// Started even when ctx is done: the control plane must not be left
	// without its API server.
	if err := s.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again (log: %s): %w", cp.WorkDir, err)
	}
	return nil
}
