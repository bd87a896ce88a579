//go:build !linux

package controlplane

import "syscall"

// sysProcAttr uses the defaults where the parent-death signal is unavailable.
func sysProcAttr() *syscall.SysProcAttr { return nil }
