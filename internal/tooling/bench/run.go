package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// Config is one benchmark.
type Config struct {
	// Ns are the resource counts; each is run Rounds times.
	Ns     []int
	Rounds int
	// OursBinary and BaselineBinary are the built operators.
	OursBinary, BaselineBinary string
	// RepoRoot is the operators' working directory; WatchesFile and CRDDir
	// are relative to it.
	RepoRoot, WatchesFile, CRDDir string
	// AssetsDir holds the control plane binaries; empty builds or finds them.
	AssetsDir string
	// WorkDir receives a directory per run: control plane logs, the audit
	// log and the operator's log.
	WorkDir string
	// UnrelatedSecrets of SecretBytes each are created to see what they cost
	// an operator's memory; Changes spec changes are timed one at a time.
	UnrelatedSecrets, SecretBytes, Changes int
	// SteadyPeriod is the --reconcile-period of the steady-state phase and
	// SteadyPeriods the periods it counts (restart.go).
	SteadyPeriod  time.Duration
	SteadyPeriods int
	// ClientWorkers is the concurrency of the benchmark's own client (the
	// creates, and the floor).
	ClientWorkers int
	// Progress receives the progress line.
	Progress io.Writer
	// OursArgs are passed to our operator after the benchmark's own (e.g.
	// --kube-api-qps=50 --kube-api-burst=100); OursOnly skips the baseline.
	// Both are for exploring: the published figures use neither.
	OursArgs []string
	OursOnly bool
	// ProfileDir, when set, receives CPU profiles of our operator's install
	// phase (profile.go); profiling costs the operator some CPU, so the
	// published figures are measured without it.
	ProfileDir string
}

// DefaultConfig is `make bench`.
func DefaultConfig() Config {
	return Config{
		Ns: []int{100, 500}, Rounds: 1,
		WatchesFile: "hack/bench/testdata/watches.yaml", CRDDir: "hack/bench/testdata/crd",
		UnrelatedSecrets: 2000, SecretBytes: 10 << 10, Changes: 50, ClientWorkers: 16,
		SteadyPeriod: DefaultSteadyPeriod, SteadyPeriods: DefaultSteadyPeriods,
	}
}

// quiet is how long an operator must make no request to count as settled;
// settleLimit is how long the benchmark waits for that after a phase at
// N ≤ 400 (settleLimitFor: longer at larger N).
const (
	quiet       = 2 * time.Second
	settleLimit = 4 * time.Minute
)

// operatorSpec is how one operator is run.
type operatorSpec struct {
	name, setting, binary string
	workers               int
	// explicitWorkers passes --max-concurrent-reconciles.
	explicitWorkers bool
	// hasReady: the operator reports Ready with observedGeneration (ours);
	// otherwise a spec change is seen in deployedRelease.manifest.
	hasReady bool
	// extra are Config.OursArgs.
	extra []string
}

// args are the operator's arguments; pprofAddr is where it serves
// /debug/pprof, from which its allocation is read (cost.go).
func (s operatorSpec) args(watches, pprofAddr string) []string {
	// A long reconcile period for both: the default (1m) would start
	// periodic reconciles in the middle of a long install, and no window
	// would ever be quiet. The no-op reconcile is triggered explicitly.
	args := []string{"--watches-file=" + watches, "--reconcile-period=1h", "--pprof-bind-address=" + pprofAddr}
	if s.name == Ours {
		args = append(args, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	}
	if s.explicitWorkers {
		args = append(args, "--max-concurrent-reconciles="+strconv.Itoa(s.workers))
	}
	if s.name == Ours {
		args = append(args, s.extra...)
	}
	return args
}

// Run runs the benchmark.
func Run(ctx context.Context, cfg Config) (Results, error) {
	start := time.Now()
	res := Results{Started: start.UTC(), Ns: cfg.Ns, Rounds: cfg.Rounds,
		Host: Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvg: loadAvg()}}
	p := newProgress(cfg.Progress)
	defer p.done()

	if cfg.AssetsDir == "" {
		dir, err := controlplane.AssetsDir()
		if err != nil {
			return res, err
		}
		cfg.AssetsDir = dir
	}
	oursDefault, err := defaultWorkers(ctx, cfg.OursBinary)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cfg.OursBinary, err)
	}
	baseDefault, err := defaultWorkers(ctx, cfg.BaselineBinary)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cfg.BaselineBinary, err)
	}
	res.DefaultWorkers = map[string]int{Ours: oursDefault, Baseline: baseDefault}
	res.EqualWorkers, res.EqualIsDefaults = baseDefault, oursDefault == baseDefault

	specs := []operatorSpec{
		{name: Ours, setting: Defaults, binary: cfg.OursBinary, workers: oursDefault, hasReady: true, extra: cfg.OursArgs},
		{name: Baseline, setting: Defaults, binary: cfg.BaselineBinary, workers: baseDefault},
	}
	if !res.EqualIsDefaults {
		// Equal concurrency: ours again, at the baseline's default. (The
		// baseline at ours would be the same comparison at several times the
		// cost: the baseline's runs are the benchmark's slow part.)
		specs = append(specs, operatorSpec{name: Ours, setting: Equal, binary: cfg.OursBinary,
			workers: baseDefault, explicitWorkers: true, hasReady: true, extra: cfg.OursArgs})
	}
	for _, n := range cfg.Ns {
		for round := 1; round <= cfg.Rounds; round++ {
			order := specs
			if round%2 == 0 { // alternate who goes first
				order = append([]operatorSpec{specs[1]}, append([]operatorSpec{specs[0]}, specs[2:]...)...)
			}
			for _, s := range cfg.selected(order) {
				p.setPrefix(fmt.Sprintf("N=%d round %d/%d %s (%s, %d workers)", n, round, cfg.Rounds, s.name, s.setting, s.workers))
				r, err := runOperator(ctx, cfg, p, s, n, round)
				if err != nil {
					return res, fmt.Errorf("N=%d round %d, %s (%s): %w", n, round, s.name, s.setting, err)
				}
				res.Runs = append(res.Runs, r)
			}
			p.setPrefix(fmt.Sprintf("N=%d round %d/%d floor (%d workers)", n, round, cfg.Rounds, cfg.ClientWorkers))
			f, err := runFloor(ctx, cfg, p, n, round)
			if err != nil {
				return res, fmt.Errorf("N=%d round %d, floor: %w", n, round, err)
			}
			res.Floors = append(res.Floors, f)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// cluster is a fresh control plane with an audit log and admin clients.
type cluster struct {
	cp  *controlplane.ControlPlane
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

func startCluster(ctx context.Context, cfg Config, dir string) (*cluster, error) {
	cp, err := controlplane.Start(ctx, controlplane.Options{
		AssetsDir: cfg.AssetsDir, WorkDir: dir, AuditLog: true,
		CRDDirectoryPaths: []string{filepath.Join(cfg.RepoRoot, cfg.CRDDir)},
	})
	if err != nil {
		return nil, err
	}
	c := &cluster{cp: cp}
	if c.cs, err = kubernetes.NewForConfig(cp.Config); err == nil {
		c.dyn, err = dynamic.NewForConfig(cp.Config)
	}
	if err == nil {
		err = createNamespaces(ctx, c.cs, benchNamespace, unrelatedNamespace)
	}
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return c, nil
}

func runOperator(ctx context.Context, cfg Config, p *progress, s operatorSpec, n, round int) (OperatorRun, error) {
	run := OperatorRun{Operator: s.name, Setting: s.setting, Workers: s.workers, N: n, Round: round, UnrelatedSecrets: cfg.UnrelatedSecrets}
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("n%d-r%d-%s-%s", n, round, s.name, strings.ReplaceAll(s.setting, " ", "-")))
	if err := os.RemoveAll(dir); err != nil {
		return run, err
	}
	p.report("starting a control plane", "")
	c, err := startCluster(ctx, cfg, dir)
	if err != nil {
		return run, err
	}
	defer func() { _ = c.cp.Stop() }()
	user := "bench-" + s.name
	kubeconfig, _, err := c.cp.AddUser(user, "system:masters")
	if err != nil {
		return run, err
	}
	audit := &auditTail{path: c.cp.AuditLogPath}

	p.report("starting the operator", "")
	pprofAddr, err := freeAddr()
	if err != nil {
		return run, err
	}
	proc, err := startProcess(s.binary, cfg.RepoRoot, kubeconfig, filepath.Join(dir, "operator.log"), s.args(cfg.WatchesFile, pprofAddr)...)
	if err != nil {
		return run, err
	}
	defer proc.stop(40 * time.Second)
	m, err := newMeter(c, operatorProcess(proc.Pid(), pprofAddr))
	if err != nil {
		return run, err
	}
	if err := waitWatchingSince(ctx, audit, proc, user, time.Time{}); err != nil {
		return run, err
	}
	if _, _, err := audit.quietAfter(user, time.Now(), quiet, time.Minute, proc.Pid()); err != nil {
		return run, err
	}
	if run.RSSIdle, err = proc.rss(); err != nil {
		return run, err
	}

	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr, err := startTracker(tctx, c.dyn, benchNamespace)
	if err != nil {
		return run, err
	}

	// Install: create all, wait for all Deployed (and Ready), then quiet.
	before, err := m.read(ctx, false)
	if err != nil {
		return run, err
	}
	stopProfiling, endHeap := func() {}, func() {}
	if cfg.ProfileDir != "" && s.name == Ours {
		// The heap profiles bracket the install phase (before the CPU
		// profiles start, after they stop): allocation by call stack.
		heap := filepath.Join(cfg.ProfileDir, filepath.Base(dir)+"-install-heap")
		if err := fetchHeap(ctx, heap+"-start.pprof", pprofAddr); err != nil {
			return run, err
		}
		endHeap = func() { _ = fetchHeap(ctx, heap+"-end.pprof", pprofAddr) }
		stopProfiling = profileCPU(tctx, cfg.ProfileDir, filepath.Base(dir)+"-install", pprofAddr)
		defer stopProfiling()
	}
	t0 := time.Now()
	var created atomic.Int64
	go func() {
		_ = tr.waitUntil(tctx, 500*time.Millisecond, func() bool {
			d, _ := tr.countTrue("Deployed")
			r, _ := tr.countTrue("Ready")
			p.report("installing", fmt.Sprintf("created %d, Deployed %d, Ready %d of %d", created.Load(), d, r, n))
			return d == n && (!s.hasReady || r == n)
		})
	}()
	if err := createApps(ctx, c.dyn, n, cfg.ClientWorkers, &created); err != nil {
		return run, fmt.Errorf("creating resources: %w", err)
	}
	ictx, icancel := context.WithTimeout(ctx, installLimitFor(n))
	defer icancel()
	err = tr.waitUntil(ictx, time.Second, func() bool {
		if proc.exited() != nil {
			return true
		}
		d, _ := tr.countTrue("Deployed")
		r, _ := tr.countTrue("Ready")
		return d == n && (!s.hasReady || r == n)
	})
	if err := proc.exited(); err != nil {
		return run, err
	}
	if err != nil {
		d, _ := tr.countTrue("Deployed")
		return run, fmt.Errorf("waiting for %d resources to be Deployed (%d are; operator log %s): %w", n, d, proc.LogPath(), err)
	}
	_, lastDeployed := tr.countTrue("Deployed")
	run.AllDeployedSeconds = lastDeployed.Sub(t0).Seconds()
	if s.hasReady {
		_, lastReady := tr.countTrue("Ready")
		run.AllReadySeconds = lastReady.Sub(t0).Seconds()
	}
	p.report("settling", "")
	end, settled, err := audit.quietAfter(user, time.Now(), quiet, settleLimitFor(n), proc.Pid())
	if err != nil {
		return run, err
	}
	run.unsettled(settled, "install")
	run.QuietSeconds = end.Sub(t0).Seconds()
	stopProfiling()
	after, err := m.read(ctx, true)
	if err != nil {
		return run, err
	}
	endHeap()
	run.InstallCost = after.since(before)
	evs, err := audit.Read()
	if err != nil {
		return run, err
	}
	run.Install = Count(evs, user, t0, end)
	if run.RSSSettled, err = proc.rss(); err != nil {
		return run, err
	}
	if run.RSSAnonSettled, err = proc.rssAnon(); err != nil {
		return run, err
	}

	if run.LatencySeconds, err = specChanges(ctx, c, tr, p, s, n, cfg.Changes); err != nil {
		return run, err
	}
	_, settled, err = audit.quietAfter(user, time.Now(), quiet, settleLimitFor(n), proc.Pid())
	if err != nil {
		return run, err
	}
	run.unsettled(settled, "spec changes")

	// No-op: one reconcile of every settled resource, by an annotation.
	p.report("no-op reconciles", "")
	tA := time.Now()
	poke := []byte(`{"metadata":{"annotations":{"bench.helmapp.io/poke":"1"}}}`)
	if err := parallel(ctx, n, cfg.ClientWorkers, nil, func(ctx context.Context, i int) error {
		_, err := c.dyn.Resource(benchGVR).Namespace(benchNamespace).Patch(ctx, appName(i), types.MergePatchType, poke, metaPatch)
		return err
	}); err != nil {
		return run, err
	}
	tB, settled, err := audit.quietAfter(user, time.Now(), quiet, settleLimitFor(n), proc.Pid())
	if err != nil {
		return run, err
	}
	run.unsettled(settled, "no-op reconciles")
	if evs, err = audit.Read(); err != nil {
		return run, err
	}
	run.NoOp = Count(evs, user, tA, tB)

	p.report("creating unrelated Secrets", strconv.Itoa(cfg.UnrelatedSecrets))
	if err := createUnrelatedSecrets(ctx, c.cs, cfg.UnrelatedSecrets, cfg.SecretBytes, cfg.ClientWorkers); err != nil {
		return run, err
	}
	_, settled, err = audit.quietAfter(user, time.Now(), quiet, settleLimitFor(n), proc.Pid())
	if err != nil {
		return run, err
	}
	run.unsettled(settled, "unrelated Secrets")
	if run.RSSAfterSecrets, err = proc.rss(); err != nil {
		return run, err
	}
	if s.setting == Defaults && cfg.SteadyPeriods > 0 {
		if run.Restarted, err = restartPhases(ctx, cfg, p, s, n, proc, kubeconfig, dir, audit, user, m); err != nil {
			return run, fmt.Errorf("restart phases: %w", err)
		}
	}
	p.report("stopping", "")
	return run, nil
}

func (r *OperatorRun) unsettled(settled bool, phase string) {
	if !settled {
		r.Unsettled = append(r.Unsettled, phase)
	}
}

func runFloor(ctx context.Context, cfg Config, p *progress, n, round int) (Floor, error) {
	f := Floor{N: n, Round: round, Workers: cfg.ClientWorkers, WritesPerCR: floorWrites, Writes: floorWrites * n}
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("n%d-r%d-floor", n, round))
	if err := os.RemoveAll(dir); err != nil {
		return f, err
	}
	p.report("starting a control plane", "")
	c, err := startCluster(ctx, cfg, dir)
	if err != nil {
		return f, err
	}
	defer func() { _ = c.cp.Stop() }()
	m, err := newMeter(c, benchProcess)
	if err != nil {
		return f, err
	}
	p.report("writing", fmt.Sprintf("%d × %d", n, floorWrites))
	d, cost, err := floorRun(ctx, c.cs, c.dyn, m, n, cfg.ClientWorkers)
	f.Seconds, f.Cost = d.Seconds(), cost
	return f, err
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
