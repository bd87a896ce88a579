package bench

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Limits that grow with N (issue 20 item 5): at N = 2000 the baseline needs
// several times the 4 min that were enough at N = 500, and a phase cut off
// at a fixed limit would report counts that are short. Each limit is the
// larger of its value at N ≤ 500 and a time per resource well above the
// slowest measured (the baseline: 0.34 s per resource to its last install
// request at N = 500, with 2 workers).
const (
	settlePerResource  = 600 * time.Millisecond
	installPerResource = 600 * time.Millisecond
	installLimitMin    = 10 * time.Minute
)

// settleLimitFor is how long the benchmark waits, after a phase at N
// resources, for the operator to make no request for `quiet`.
func settleLimitFor(n int) time.Duration {
	return max(settleLimit, time.Duration(n)*settlePerResource)
}

// installLimitFor is how long the benchmark waits for N resources to be
// Deployed (and Ready).
func installLimitFor(n int) time.Duration {
	return max(installLimitMin, time.Duration(n)*installPerResource)
}

// KBPerResource is the operator's memory per resource: its resident set once
// settled after the installs, less its resident set when it was idle (started,
// watching, quiet) before the first resource was created, divided by N, in
// KiB. It is what each more resource costs (caches, Helm's release records,
// metrics, and what the runtime keeps of the install burst's heap), not the
// binary and the runtime's fixed share. NaN if either figure is missing.
func KBPerResource(r OperatorRun) float64 {
	if r.RSSIdle <= 0 || r.RSSSettled <= 0 || r.N <= 0 {
		return math.NaN()
	}
	return float64(r.RSSSettled-r.RSSIdle) / 1024 / float64(r.N)
}

// perResourceMillis is a time in seconds per resource, in ms.
func perResourceMillis(f func(OperatorRun) float64) func(OperatorRun) float64 {
	return func(r OperatorRun) float64 { return f(r) / float64(r.N) }
}

func kib(v float64) string { return fmt.Sprintf("%.0f KB", v) }

// sizeFigures are the rows that show how the cost per resource grows with N;
// they follow the table's others.
var sizeFigures = []figure{
	{name: "RSS idle (before any resource)", run: func(r OperatorRun) float64 {
		if r.RSSIdle <= 0 {
			return math.NaN()
		}
		return float64(r.RSSIdle)
	}, format: mb},
	{name: "memory per resource (RSS settled − RSS idle) / N", run: KBPerResource, format: kib},
	{name: "  RSS settled, anonymous (RssAnon: heap, stacks)", run: func(r OperatorRun) float64 {
		if r.RSSAnonSettled <= 0 {
			return math.NaN()
		}
		return float64(r.RSSAnonSettled)
	}, format: mb},
	{name: "time to all Deployed per resource", run: perResourceMillis(func(r OperatorRun) float64 { return r.AllDeployedSeconds }),
		floor: func(f Floor) float64 { return f.Seconds / float64(f.N) }, format: millis},
}

func init() { figures = append(figures, sizeFigures...) }

// selected is specs, or only ours at its defaults when cfg.OursOnly
// (exploring: a sweep of settings, a profile); the floor still runs.
func (cfg Config) selected(specs []operatorSpec) []operatorSpec {
	if !cfg.OursOnly {
		return specs
	}
	var out []operatorSpec
	for _, s := range specs {
		if s.name == Ours && s.setting == Defaults {
			out = append(out, s)
		}
	}
	return out
}

// rssAnon returns the process's anonymous resident memory in bytes (RssAnon:
// its heap and stacks; the rest of VmRSS is mostly the binary's pages, which
// the kernel shares and may drop).
func (p *process) rssAnon() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusKB(bufio.NewScanner(f), "RssAnon:")
}

// parseStatusKB reads the line "<field>	  1234 kB" of /proc/<pid>/status,
// in bytes.
func parseStatusKB(sc *bufio.Scanner, field string) (int64, error) {
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == field && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s line", field)
}
