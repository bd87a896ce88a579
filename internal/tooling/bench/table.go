package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// The benchmark's kind, as the audit log names it.
const benchResource = "benchapps"

// figure is one row of the table: how to read it from a run and, where the
// floor has a counterpart, from the floor.
type figure struct {
	name  string
	run   func(OperatorRun) float64
	floor func(Floor) float64
	// format renders a value.
	format func(float64) string
}

func perResource(f func(OperatorRun) int) func(OperatorRun) float64 {
	return func(r OperatorRun) float64 { return float64(f(r)) / float64(r.N) }
}

func seconds(v float64) string { return fmt.Sprintf("%.1f s", v) }
func millis(v float64) string  { return fmt.Sprintf("%.0f ms", v*1000) }
func count(v float64) string   { return fmt.Sprintf("%.1f", v) }
func mb(v float64) string      { return fmt.Sprintf("%.0f MB", v/1e6) }

// cpuMillis renders CPU-seconds; allocated renders bytes, in kB under 1 MB.
func cpuMillis(v float64) string { return fmt.Sprintf("%.1f ms", v*1000) }
func allocated(v float64) string {
	if v < 1e6 {
		return fmt.Sprintf("%.0f kB", v/1e3)
	}
	return fmt.Sprintf("%.2f MB", v/1e6)
}

// costFigures are a Cost's rows per resource, from cost (of a run) and, for
// the floor, from its Cost; prefix starts each name.
func costFigures(prefix string, cost func(OperatorRun) *Cost, floor bool) []figure {
	fs := []struct {
		name   string
		value  func(Cost) float64
		format func(float64) string
	}{
		{"operator CPU per resource", func(c Cost) float64 { return c.OperatorCPUSeconds }, cpuMillis},
		{"API server CPU per resource", func(c Cost) float64 { return c.APIServerCPUSeconds }, cpuMillis},
		{"etcd CPU per resource", func(c Cost) float64 { return c.EtcdCPUSeconds }, cpuMillis},
		{"operator allocation per resource", func(c Cost) float64 { return float64(c.OperatorAllocBytes) }, allocated},
	}
	out := make([]figure, 0, len(fs))
	for _, f := range fs {
		fig := figure{name: prefix + f.name, format: f.format, run: func(r OperatorRun) float64 {
			c := cost(r)
			if c == nil {
				return nanValue
			}
			return f.value(*c) / float64(r.N)
		}}
		if floor {
			fig.floor = func(fl Floor) float64 { return f.value(fl.Cost) / float64(fl.N) }
		}
		out = append(out, fig)
	}
	return out
}

var countFigures = []figure{
	{name: "time to all Ready", run: func(r OperatorRun) float64 {
		if r.AllReadySeconds == 0 {
			return math.NaN()
		}
		return r.AllReadySeconds
	}, floor: func(f Floor) float64 { return f.Seconds }, format: seconds},
	{name: "time to all Deployed", run: func(r OperatorRun) float64 { return r.AllDeployedSeconds },
		floor: func(f Floor) float64 { return f.Seconds }, format: seconds},
	{name: "time to the last install request", run: func(r OperatorRun) float64 { return r.QuietSeconds },
		floor: func(f Floor) float64 { return f.Seconds }, format: seconds},
	{name: "API requests per resource", run: perResource(func(r OperatorRun) int { return r.Install.Requests }),
		floor: func(f Floor) float64 { return float64(f.WritesPerCR) }, format: count},
	{name: "  of which discovery/OpenAPI get", run: perResource(func(r OperatorRun) int { return r.Install.Sum("get discovery", "get openapi") }), format: count},
	{name: "  list secrets (Helm storage)", run: perResource(func(r OperatorRun) int { return r.Install.Sum("list secrets") }), format: count},
	{name: "  get configmaps", run: perResource(func(r OperatorRun) int { return r.Install.Sum("get configmaps") }), format: count},
	{name: "  get secrets", run: perResource(func(r OperatorRun) int { return r.Install.Sum("get secrets") }), format: count},
	{name: "writes per resource", run: perResource(func(r OperatorRun) int { return r.Install.Writes }),
		floor: func(f Floor) float64 { return float64(f.WritesPerCR) }, format: count},
	{name: "status writes per install", run: perResource(func(r OperatorRun) int { return r.Install.StatusWrites(benchResource) }),
		floor: func(Floor) float64 { return 1 }, format: count},
}

// figures are the install phase's rows (and those after it): the counts,
// then what the install cost (the floor's operator is the benchmark's
// client), then the rest.
var figures = slices.Concat(countFigures,
	costFigures("install: ", func(r OperatorRun) *Cost { return &r.InstallCost }, true), laterFigures)

var laterFigures = []figure{
	{name: "spec change to status, p50", run: func(r OperatorRun) float64 { return Percentile(r.LatencySeconds, 50) }, format: millis},
	{name: "spec change to status, p95", run: func(r OperatorRun) float64 { return Percentile(r.LatencySeconds, 95) }, format: millis},
	{name: "no-op reconcile: requests per resource", run: perResource(func(r OperatorRun) int { return r.NoOp.Requests }), format: count},
	{name: "no-op reconcile: writes per resource", run: perResource(func(r OperatorRun) int { return r.NoOp.Writes }), format: count},
	{name: "RSS settled", run: func(r OperatorRun) float64 { return float64(r.RSSSettled) }, format: mb},
	{name: "RSS after the unrelated Secrets", run: func(r OperatorRun) float64 { return float64(r.RSSAfterSecrets) }, format: mb},
}

// Render writes one table per N and setting (medians over the rounds), each
// followed by the requests per resource by verb and resource.
func Render(w io.Writer, res Results) error {
	var b strings.Builder
	settings := []string{Defaults}
	if !res.EqualIsDefaults {
		settings = append(settings, Equal)
	}
	for _, n := range res.Ns {
		floors := floorsOf(res.Floors, n)
		for _, setting := range settings {
			ours := runsOf(res.Runs, Ours, setting, n)
			base := runsOf(res.Runs, Baseline, baselineSetting(setting), n)
			if len(ours) == 0 && len(base) == 0 {
				continue
			}
			title := setting
			if setting == Defaults && res.EqualIsDefaults {
				title = "defaults = equal concurrency"
			}
			fmt.Fprintf(&b, "\nN = %d, %s (ours %s, baseline %s; median of %d round(s))\n\n",
				n, title, workers(ours), workers(base), max(len(ours), len(base)))
			b.WriteString("| figure | ours | baseline | ours / baseline | ours × floor | baseline × floor |\n")
			b.WriteString("|---|---:|---:|---:|---:|---:|\n")
			for _, f := range slices.Concat(figures, restartFigures, restartCostFigures, steadyFigures) {
				o, bl := median(ours, f.run), median(base, f.run)
				fl := math.NaN()
				if f.floor != nil {
					fl = medianFloor(floors, f.floor)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", f.name,
					value(f.format, o), value(f.format, bl), ratio(o, bl), ratio(o, fl), ratio(bl, fl))
			}
			if len(floors) > 0 {
				fmt.Fprintf(&b, "\nFloor: %d writes per resource by a plain client with %d workers: %s.\n",
					floors[0].WritesPerCR, floors[0].Workers, seconds(medianFloor(floors, func(f Floor) float64 { return f.Seconds })))
			}
			for _, r := range append(slices.Clone(ours), base...) {
				if len(r.Unsettled) > 0 {
					fmt.Fprintf(&b, "\nWarning: %s (round %d) was still making requests when the benchmark stopped waiting after: %s; those counts may be short.\n",
						r.Operator, r.Round, strings.Join(r.Unsettled, ", "))
				}
			}
			breakdown(&b, ours, base)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// baselineSetting: the baseline runs once, at its default, which is the
// equal concurrency too (ours runs again at it).
func baselineSetting(string) string { return Defaults }

func breakdown(b *strings.Builder, ours, base []OperatorRun) {
	keys := map[string]bool{}
	for _, r := range append(slices.Clone(ours), base...) {
		for k := range r.Install.ByKey {
			keys[k] = true
		}
	}
	byKey := func(k string) func(OperatorRun) float64 {
		return func(r OperatorRun) float64 { return float64(r.Install.ByKey[k]) / float64(r.N) }
	}
	sorted := slices.SortedFunc(maps.Keys(keys), func(a, c string) int {
		av := zeroNaN(median(ours, byKey(a))) + zeroNaN(median(base, byKey(a)))
		cv := zeroNaN(median(ours, byKey(c))) + zeroNaN(median(base, byKey(c)))
		return cmp.Or(cmp.Compare(cv, av), strings.Compare(a, c))
	})
	b.WriteString("\nRequests per resource to install, by verb and resource (audit log):\n\n")
	b.WriteString("| request | ours | baseline |\n|---|---:|---:|\n")
	for _, k := range sorted {
		fmt.Fprintf(b, "| %s | %s | %s |\n", k, value(twoDecimals, median(ours, byKey(k))), value(twoDecimals, median(base, byKey(k))))
	}
}

func twoDecimals(v float64) string { return fmt.Sprintf("%.2f", v) }

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

func runsOf(runs []OperatorRun, operator, setting string, n int) []OperatorRun {
	var out []OperatorRun
	for _, r := range runs {
		if r.Operator == operator && r.Setting == setting && r.N == n {
			out = append(out, r)
		}
	}
	return out
}

func floorsOf(floors []Floor, n int) []Floor {
	var out []Floor
	for _, f := range floors {
		if f.N == n {
			out = append(out, f)
		}
	}
	return out
}

func workers(runs []OperatorRun) string {
	if len(runs) == 0 {
		return "not run"
	}
	return fmt.Sprintf("%d workers", runs[0].Workers)
}

func median(runs []OperatorRun, f func(OperatorRun) float64) float64 {
	var vs []float64
	for _, r := range runs {
		if v := f(r); !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	return Median(vs)
}

func medianFloor(floors []Floor, f func(Floor) float64) float64 {
	vs := make([]float64, 0, len(floors))
	for _, fl := range floors {
		vs = append(vs, f(fl))
	}
	return Median(vs)
}

func value(format func(float64) string, v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return format(v)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}
