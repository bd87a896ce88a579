package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// process is an operator binary run by the benchmark.
type process struct{ *controlplane.Process }

// startProcess runs binary with args in dir, with kubeconfig's credentials,
// logging to logPath.
func startProcess(binary, dir, kubeconfig, logPath string, args ...string) (*process, error) {
	p, err := controlplane.StartProcess(controlplane.Command{Name: binary, Binary: binary, Args: args, Dir: dir,
		Env: []string{"KUBECONFIG=" + kubeconfig}, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	return &process{p}, nil
}

// exited returns an error once the process has exited.
func (p *process) exited() error { return p.Exited() }

// stop sends SIGTERM and kills the process if it has not exited within
// grace.
func (p *process) stop(grace time.Duration) { _ = p.Stop(grace) }

// rss returns the process's resident set size in bytes (VmRSS).
func (p *process) rss() (int64, error) {
	return readRSS(fmt.Sprintf("/proc/%d/status", p.Pid()))
}

func readRSS(statusFile string) (int64, error) {
	f, err := os.Open(statusFile)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseRSS(bufio.NewScanner(f))
}

// parseRSS reads the VmRSS line ("VmRSS:	  91234 kB") of /proc/<pid>/status.
func parseRSS(sc *bufio.Scanner) (int64, error) {
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "VmRSS:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line")
}

var workersDefault = regexp.MustCompile(`-max-concurrent-reconciles int\n[^\n]*\(default (\d+)\)`)

// defaultWorkers reads the default of --max-concurrent-reconciles from
// binary's -help output, so the benchmark follows a changed default.
func defaultWorkers(ctx context.Context, binary string) (int, error) {
	out, _ := exec.CommandContext(ctx, binary, "-help").CombinedOutput()
	return parseDefaultWorkers(string(out))
}

func parseDefaultWorkers(help string) (int, error) {
	m := workersDefault.FindStringSubmatch(help)
	if m == nil {
		return 0, errors.New("no default for -max-concurrent-reconciles in the -help output")
	}
	return strconv.Atoi(m[1])
}
