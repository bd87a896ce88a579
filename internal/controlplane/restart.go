package controlplane

import (
	"context"
	"fmt"
	"time"
)

// RestartAPIServer stops kube-apiserver, waits down, and starts it again on
// the same etcd, address, serving certificate and client CA: clients (the
// kubeconfig, Config, the cluster's components) see it go away and come back
// with all its data, and need nothing new. It returns once the new process
// is healthy.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	if cp.env == nil || cp.stopped {
		return fmt.Errorf("restarting kube-apiserver: the control plane is not running")
	}
	s := cp.env.ControlPlane.APIServer
	if err := s.Stop(); err != nil {
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
