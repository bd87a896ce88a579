//go:build !linux

package controlplane

import (
	"os/exec"
	"syscall"
)

// sysProcAttr uses the defaults where the parent-death signal is unavailable.
func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

// cancelAsGroup keeps exec's default cancellation (kill the process only).
func cancelAsGroup(*exec.Cmd) {}
