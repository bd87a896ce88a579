package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before it is
// killed.
const stopGrace = 10 * time.Second

// component is one child process of a full control plane, with its combined
// stdout and stderr in a log file.
type component struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	logFile *os.File
	// done is closed once the process has exited and been reaped; waitErr
	// is valid after that.
	done    chan struct{}
	waitErr error
}

// startComponent runs binary with args, logging to <workDir>/<name>.log.
func startComponent(name, binary, workDir string, args ...string) (*component, error) {
	logPath := filepath.Join(workDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	// Not CommandContext: the component lives until Stop, not until the
	// context that started the control plane is done.
	cmd := exec.Command(binary, args...)
	cmd.Dir = workDir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &component{name: name, logPath: logPath, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports, without blocking, an error describing an early exit, or
// nil while the process runs.
func (c *component) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited early (%v); see %s", c.name, c.waitErr, c.logPath)
	default:
		return nil
	}
}

// stop sends SIGTERM, waits up to stopGrace, then kills. It returns once the
// process is reaped, so no child outlives the control plane.
func (c *component) stop() error {
	defer c.logFile.Close()
	select {
	case <-c.done:
		return nil // already gone; exited() reports early exits
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", c.name, err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(stopGrace):
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", c.name, err)
	}
	<-c.done
	return fmt.Errorf("%s did not exit within %s of SIGTERM and was killed; see %s", c.name, stopGrace, c.logPath)
}
