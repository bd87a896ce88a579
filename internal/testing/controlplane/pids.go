package controlplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// PIDs returns the process ids of this control plane's kube-apiserver and
// etcd, so that a caller (the benchmark) can read what they cost from /proc.
// envtest does not expose them: each is found in /proc by the argument
// that is this control plane's alone (kube-apiserver's --cert-dir, etcd's
// --data-dir), so other control planes on the machine are never taken. Read
// them again after RestartAPIServer. Linux only.
func (cp *ControlPlane) PIDs() (apiServer, etcd int, err error) {
	if cp.env == nil || cp.stopped {
		return 0, 0, fmt.Errorf("the control plane is not running")
	}
	want := map[string]string{
		"--cert-dir=" + cp.env.ControlPlane.APIServer.CertDir: binAPIServer,
		"--data-dir=" + cp.env.ControlPlane.Etcd.DataDir:      binEtcd,
	}
	found, err := findProcesses(want)
	if err != nil {
		return 0, 0, err
	}
	if found[binAPIServer] == 0 || found[binEtcd] == 0 {
		return 0, 0, fmt.Errorf("kube-apiserver (pid %d) or etcd (pid %d) not found in /proc", found[binAPIServer], found[binEtcd])
	}
	return found[binAPIServer], found[binEtcd], nil
}

// findProcesses returns, for each binary name in want (keyed by an argument
// its process must have), the pid of a process of that binary with that
// argument.
func findProcesses(want map[string]string) (map[string]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	found := map[string]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // exited meanwhile, or a kernel thread
		}
		args := bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0})
		for _, a := range args[1:] {
			if bin, ok := want[string(a)]; ok && filepath.Base(string(args[0])) == bin {
				found[bin] = pid
			}
		}
	}
	return found, nil
}

// ControllerManagerPID returns the pid of the full control plane's
// kube-controller-manager, 0 when it runs none: a test stops it (SIGSTOP)
// to stand for a controller manager that lags, as one does while its
// watches come back after an API server restart.
func (cp *ControlPlane) ControllerManagerPID() int {
	for _, c := range cp.components {
		if c.name == binControllerManager {
			return c.Pid()
		}
	}
	return 0
}
