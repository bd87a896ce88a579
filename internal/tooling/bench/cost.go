package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// Issue 27 item 1: what a phase costs in CPU-seconds and allocated bytes.
// Unlike wall time, these hardly depend on what else the machine does.

// Cost is what one phase cost, in total over the N resources (the table
// divides by N).
type Cost struct {
	// OperatorCPUSeconds is the operator process' user + system CPU time;
	// for the floor, the benchmark process' (its client is the operator).
	OperatorCPUSeconds float64 `json:"operatorCPUSeconds"`
	// APIServerCPUSeconds and EtcdCPUSeconds are kube-apiserver's and
	// etcd's, the benchmark's own creates included (as in the floor).
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds"`
	EtcdCPUSeconds      float64 `json:"etcdCPUSeconds"`
	// OperatorAllocBytes is what the operator allocated on the Go heap
	// (runtime.MemStats.TotalAlloc, read from its pprof endpoint; for the
	// floor, the benchmark's /gc/heap/allocs:bytes).
	OperatorAllocBytes int64 `json:"operatorAllocBytes"`
	// Measured is set once all four were read. A CPU figure may be 0 when
	// measured: /proc counts in 10 ms ticks, more than a few writes of a
	// smoke run cost etcd or the floor's client.
	Measured bool `json:"measured"`
}

// missing names the figures of c that were not measured.
func (c Cost) missing() []string {
	switch {
	case !c.Measured:
		return []string{"CPU and allocation"}
	case c.OperatorAllocBytes <= 0: // the Go runtime allocates whatever it does
		return []string{"operator allocation"}
	}
	return nil
}

// usage is the cumulative counters a Cost is the difference of.
type usage struct {
	operatorCPU, apiServerCPU, etcdCPU float64
	operatorAlloc                      int64
}

func (u usage) since(before usage) Cost {
	return Cost{OperatorCPUSeconds: u.operatorCPU - before.operatorCPU, APIServerCPUSeconds: u.apiServerCPU - before.apiServerCPU,
		EtcdCPUSeconds: u.etcdCPU - before.etcdCPU, OperatorAllocBytes: u.operatorAlloc - before.operatorAlloc, Measured: true}
}

// meter reads the counters of one control plane and one operator.
type meter struct {
	apiServerPID, etcdPID int
	// operator reads the operator's CPU-seconds and allocated bytes.
	operator operatorReader
}

// operatorReader reads an operator's CPU-seconds and allocated bytes; atEnd
// says whether a phase ends (else it starts) with this reading.
type operatorReader func(ctx context.Context, atEnd bool) (float64, int64, error)

func newMeter(c *cluster, operator operatorReader) (*meter, error) {
	api, etcd, err := c.cp.PIDs()
	if err != nil {
		return nil, err
	}
	return &meter{apiServerPID: api, etcdPID: etcd, operator: operator}, nil
}

// read returns the counters now, at the start of a phase or at its end.
func (m *meter) read(ctx context.Context, atEnd bool) (usage, error) {
	var u usage
	var err error
	if u.operatorCPU, u.operatorAlloc, err = m.operator(ctx, atEnd); err != nil {
		return u, fmt.Errorf("reading the operator's CPU and allocation: %w", err)
	}
	if u.apiServerCPU, err = processCPU(m.apiServerPID); err != nil {
		return u, err
	}
	if u.etcdCPU, err = processCPU(m.etcdPID); err != nil {
		return u, err
	}
	return u, nil
}

// readControlPlane returns the API server's and etcd's counters now, and
// zero for the operator: the start of a new operator process.
func (m *meter) readControlPlane() (usage, error) {
	var u usage
	var err error
	if u.apiServerCPU, err = processCPU(m.apiServerPID); err != nil {
		return u, err
	}
	u.etcdCPU, err = processCPU(m.etcdPID)
	return u, err
}

// operatorProcess reads an operator process: CPU from /proc, allocation from
// its pprof endpoint at addr. Serving that request costs the operator some
// CPU, so its CPU is read after the request at a phase's start and before
// it at the end: the request falls outside the phase.
func operatorProcess(pid int, addr string) operatorReader {
	return func(ctx context.Context, atEnd bool) (float64, int64, error) {
		var cpu float64
		var err error
		if atEnd {
			if cpu, err = processCPU(pid); err != nil {
				return 0, 0, err
			}
		}
		alloc, err := totalAlloc(ctx, addr)
		if err != nil {
			return 0, 0, err
		}
		if !atEnd {
			cpu, err = processCPU(pid)
		}
		return cpu, alloc, err
	}
}

// benchProcess reads the benchmark's own process, whose client is the
// floor's operator.
func benchProcess(context.Context, bool) (float64, int64, error) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, 0, errors.New("runtime/metrics: no /gc/heap/allocs:bytes")
	}
	cpu, err := processCPU(os.Getpid())
	return cpu, int64(s[0].Value.Uint64()), err
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux ABI Go supports.
const clockTicks = 100

// processCPU returns pid's user + system CPU time in seconds.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat
// line; the command name (field 2, in parentheses) may hold spaces.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	fields := strings.Fields(stat[i+1:]) // from field 3 (state) on
	if len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return float64(utime+stime) / clockTicks, nil
}

// totalAlloc reads runtime.MemStats.TotalAlloc from the process' pprof
// endpoint (the text form of the allocs profile ends with the MemStats).
func totalAlloc(ctx context.Context, addr string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/allocs?debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	return parseTotalAlloc(resp.Body)
}

func parseTotalAlloc(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# TotalAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no TotalAlloc in the allocs profile")
}

// freeAddr returns a loopback address with a free port, for an operator's
// pprof endpoint.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
