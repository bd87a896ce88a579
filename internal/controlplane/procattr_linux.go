package controlplane

import "syscall"

// sysProcAttr puts a component in its own process group (a terminal's Ctrl-C
// reaches the test binary, which then stops components in order) and has the
// kernel kill it if the process that started it dies without calling Stop,
// so a crashed or killed test leaves no orphans.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
