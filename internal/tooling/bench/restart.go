package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Issue 20 item 2: what a new operator process costs over N settled
// resources, and what a settled resource costs per reconcile period.

// Default steady-state settings: the reconcile period the operator is
// restarted with for the steady-state phase, and how many periods are
// counted. BENCH_SMOKE uses a shorter period and one period.
const (
	DefaultSteadyPeriod  = 20 * time.Second
	DefaultSteadyPeriods = 2
)

// RestartRun is what the restart and steady-state phases measured.
type RestartRun struct {
	// Restart counts the requests of a new process (the old one stopped
	// with SIGTERM) over the N settled resources, from its start until it
	// fell quiet; QuietSeconds is that time.
	Restart      Tally   `json:"restart"`
	QuietSeconds float64 `json:"quietSeconds"`
	// RSS is the new process' VmRSS once quiet: everything it holds after
	// one reconcile of each resource (ours: with the memo of settled
	// revisions filled).
	RSS int64 `json:"rssBytes"`
	// Cost is what the restart cost in CPU and allocation: the new process'
	// all (it starts at zero), the API server's and etcd's over the same
	// window.
	Cost Cost `json:"cost"`
	// Unsettled: the new process had not fallen quiet within the limit.
	Unsettled bool `json:"unsettled,omitempty"`
	// Steady counts the requests of a process started with
	// --reconcile-period=PeriodSeconds over Periods periods, once its
	// start's work was done: the periodic reconciles of settled resources.
	Steady        Tally   `json:"steady"`
	PeriodSeconds float64 `json:"periodSeconds"`
	Periods       int     `json:"periods"`
	// SteadyStartQuiet: the process started for the steady-state phase fell
	// quiet before the window began (else the window holds the tail of its
	// start's work too).
	SteadyStartQuiet bool `json:"steadyStartQuiet"`
}

// restartPhases stops proc, the operator that ran the other phases, then
// runs the restart phase and the steady-state phase, each with a new
// process of s over the same cluster. It stops every process it starts.
func restartPhases(ctx context.Context, cfg Config, p *progress, s operatorSpec, n int, proc *process,
	kubeconfig, dir string, audit *auditTail, user string, m *meter) (*RestartRun, error) {
	rr := &RestartRun{PeriodSeconds: cfg.SteadyPeriod.Seconds(), Periods: cfg.SteadyPeriods}
	p.report("restart: stopping the operator", "")
	proc.stop(40 * time.Second)

	// Restart: a new process with the same arguments, until quiet.
	p.report("restart: a new process over the settled resources", "")
	pprofAddr, err := freeAddr()
	if err != nil {
		return rr, err
	}
	before, err := m.readControlPlane()
	if err != nil {
		return rr, err
	}
	t0 := time.Now()
	next, err := startProcess(s.binary, cfg.RepoRoot, kubeconfig, filepath.Join(dir, "operator-restart.log"), s.args(cfg.WatchesFile, pprofAddr)...)
	if err != nil {
		return rr, err
	}
	if err := waitWatchingSince(ctx, audit, next, user, t0); err != nil {
		next.stop(40 * time.Second)
		return rr, err
	}
	end, settled, err := audit.quietAfter(user, t0, quiet, settleLimit, next.Pid())
	if err != nil {
		next.stop(40 * time.Second)
		return rr, err
	}
	rr.Unsettled = !settled
	rr.QuietSeconds = end.Sub(t0).Seconds()
	after, err := (&meter{apiServerPID: m.apiServerPID, etcdPID: m.etcdPID,
		operator: operatorProcess(next.Pid(), pprofAddr)}).read(ctx, true)
	if err != nil {
		next.stop(40 * time.Second)
		return rr, err
	}
	rr.Cost = after.since(before)
	evs, err := audit.Read()
	if err != nil {
		next.stop(40 * time.Second)
		return rr, err
	}
	rr.Restart = Count(evs, user, t0, end)
	if rr.RSS, err = next.rss(); err != nil {
		next.stop(40 * time.Second)
		return rr, err
	}
	next.stop(40 * time.Second)

	// Steady state: a process with a short reconcile period; once its start
	// is done, count what the periodic reconciles ask.
	period := cfg.SteadyPeriod
	p.report("steady state: a process with --reconcile-period="+period.String(), "")
	t1 := time.Now()
	args := replaceArg(s.args(cfg.WatchesFile, "0"), "--reconcile-period=", period.String())
	steady, err := startProcess(s.binary, cfg.RepoRoot, kubeconfig, filepath.Join(dir, "operator-steady.log"), args...)
	if err != nil {
		return rr, err
	}
	defer steady.stop(40 * time.Second)
	if err := waitWatchingSince(ctx, audit, steady, user, t1); err != nil {
		return rr, err
	}
	// The start's reconciles; the first periodic ones follow a period after
	// each resource's last reconcile, so a quiet moment comes before them
	// unless the start takes longer than a period.
	_, rr.SteadyStartQuiet, err = audit.quietAfter(user, t1, quiet, period, steady.Pid())
	if err != nil {
		return rr, err
	}
	window := time.Duration(cfg.SteadyPeriods) * period
	tS := time.Now()
	for time.Since(tS) < window {
		if err := steady.exited(); err != nil {
			return rr, err
		}
		p.report("steady state", fmt.Sprintf("%.0f of %.0f s", time.Since(tS).Seconds(), window.Seconds()))
		select {
		case <-ctx.Done():
			return rr, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if evs, err = audit.Read(); err != nil {
		return rr, err
	}
	rr.Steady = Count(evs, user, tS, tS.Add(window))
	return rr, nil
}

// replaceArg returns args with the value of the flag prefix (e.g.
// "--reconcile-period=") set to value.
func replaceArg(args []string, prefix, value string) []string {
	out := make([]string, 0, len(args)+1)
	found := false
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			a, found = prefix+value, true
		}
		out = append(out, a)
	}
	if !found {
		out = append(out, prefix+value)
	}
	return out
}

// waitWatchingSince waits until the operator's user has listed or watched
// the benchmark's kind since t (the zero time: ever): the (new) process'
// controller is running.
func waitWatchingSince(ctx context.Context, audit *auditTail, proc *process, user string, t time.Time) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := proc.exited(); err != nil {
			return err
		}
		evs, err := audit.Read()
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		for _, e := range evs {
			if e.User == user && !e.Received.Before(t) && (e.Verb == "watch" || e.Verb == "list") && e.Resource == benchResource {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the operator did not list or watch %s within 2m; see %s", benchResource, proc.LogPath())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// restartFigures are the table's rows for the restart and steady-state
// phases; a run without them (ours at equal concurrency) shows none.
var restartFigures = []figure{
	{name: "restart: requests per resource", run: restartPerResource(func(r *RestartRun) int { return r.Restart.Requests }), format: count},
	{name: "  of which list secrets", run: restartPerResource(func(r *RestartRun) int { return r.Restart.Sum("list secrets") }), format: twoDecimals},
	{name: "  get secrets", run: restartPerResource(func(r *RestartRun) int { return r.Restart.Sum("get secrets") }), format: twoDecimals},
	{name: "restart: writes per resource", run: restartPerResource(func(r *RestartRun) int { return r.Restart.Writes }), format: twoDecimals},
	{name: "restart: time until quiet", run: func(r OperatorRun) float64 {
		if r.Restarted == nil {
			return nanValue
		}
		return r.Restarted.QuietSeconds
	}, format: seconds},
	{name: "restart: RSS once quiet", run: func(r OperatorRun) float64 {
		if r.Restarted == nil {
			return nanValue
		}
		return float64(r.Restarted.RSS)
	}, format: mb},
}

// restartCostFigures are what the restart cost, per resource.
var restartCostFigures = costFigures("restart: ", func(r OperatorRun) *Cost {
	if r.Restarted == nil {
		return nil
	}
	return &r.Restarted.Cost
}, false)

var steadyFigures = []figure{
	{name: "steady state: requests per resource per period", run: steadyPerResource(func(r *RestartRun) int { return r.Steady.Requests }), format: twoDecimals},
	{name: "  of which secrets (list and get)", run: steadyPerResource(func(r *RestartRun) int { return r.Steady.Sum("list secrets", "get secrets") }), format: twoDecimals},
	{name: "steady state: writes per resource per period", run: steadyPerResource(func(r *RestartRun) int { return r.Steady.Writes }), format: twoDecimals},
}

var nanValue = math.NaN()

func restartPerResource(f func(*RestartRun) int) func(OperatorRun) float64 {
	return func(r OperatorRun) float64 {
		if r.Restarted == nil {
			return nanValue
		}
		return float64(f(r.Restarted)) / float64(r.N)
	}
}

func steadyPerResource(f func(*RestartRun) int) func(OperatorRun) float64 {
	return func(r OperatorRun) float64 {
		if r.Restarted == nil || r.Restarted.Periods == 0 {
			return nanValue
		}
		return float64(f(r.Restarted)) / float64(r.N*r.Restarted.Periods)
	}
}
