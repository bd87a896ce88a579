package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before it is
// killed.
const stopGrace = 10 * time.Second

// Command says how to run a child process: the one launcher of the control
// plane's components, the benchmark's operator processes and the e2e
// suite's.
type Command struct {
	// Name names the process in errors ("etcd", "the operator").
	Name string
	// Binary and Args are what runs, in Dir.
	Binary string
	Args   []string
	Dir    string
	// Env is added to this process's environment, or is the whole
	// environment when OnlyEnv is set (a process that must see only what a
	// pod would give it).
	Env     []string
	OnlyEnv bool
	// LogPath receives the combined stdout and stderr: truncated, or
	// appended to when Append is set.
	LogPath string
	Append  bool
	// KillWithParent has the kernel kill the process if the process that
	// started it dies without stopping it (Linux), so that a crashed or
	// killed test leaves no orphans.
	KillWithParent bool
}

// Process is a child process started by StartProcess, in its own process group (a
// terminal's Ctrl-C reaches the parent, which then stops it in order).
type Process struct {
	name, logPath string
	cmd           *exec.Cmd
	log           *os.File
	// done is closed once the process has exited and been reaped; err is
	// valid after that.
	done chan struct{}
	err  error
}

// StartProcess starts c.
func StartProcess(c Command) (*Process, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if c.Append {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	log, err := os.OpenFile(c.LogPath, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", c.Name, err)
	}
	// Not CommandContext: the process lives until Stop, not until the
	// context that started it is done.
	cmd := exec.Command(c.Binary, c.Args...)
	cmd.Dir = c.Dir
	switch {
	case c.OnlyEnv:
		cmd.Env = c.Env
	case len(c.Env) > 0:
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr(c.KillWithParent)
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", c.Name, err)
	}
	p := &Process{name: c.Name, logPath: c.LogPath, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the process's log.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited, once Done is closed.
func (p *Process) Err() error { return p.err }

// Exited reports, without blocking, an error describing an early exit, or
// nil while the process runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early (%v); see %s", p.name, p.err, p.logPath)
	default:
		return nil
	}
}

// Kill kills the process with sig (SIGKILL, as the OOM killer or a node
// failure would) and waits until it is reaped; a process already gone is an
// error.
func (p *Process) Kill(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return p.log.Close()
}

// Stop sends SIGTERM, waits up to grace, then kills. It returns once the
// process is reaped, so that no child outlives its parent; the error says
// that it had to be killed. A process that had exited before is left alone
// (Exited and Err say how it ended).
func (p *Process) Stop(grace time.Duration) error {
	defer p.log.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return fmt.Errorf("%s did not exit within %s of SIGTERM and was killed; see %s", p.name, grace, p.logPath)
}
