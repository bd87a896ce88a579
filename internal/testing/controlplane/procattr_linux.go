package controlplane

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts a process in its own process group (a terminal's Ctrl-C
// reaches the parent, which then stops it in order) and, with
// killWithParent, has the kernel kill it if the process that started it dies
// without calling Stop, so a crashed or killed test leaves no orphans.
func sysProcAttr(killWithParent bool) *syscall.SysProcAttr {
	if killWithParent {
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// cancelAsGroup makes cancelling cmd's context terminate its whole process
// group (the build script and the go build it runs), so the script's cleanup
// runs instead of leaving a compiler working for nobody.
func cancelAsGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
}
