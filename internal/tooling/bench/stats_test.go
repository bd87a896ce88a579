package bench

import (
	"bufio"
	"math"
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	vs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1..10 unsorted
	for _, tc := range []struct{ p, want float64 }{{50, 5}, {95, 10}, {90, 9}, {10, 1}, {1, 1}, {100, 10}} {
		if got := Percentile(vs, tc.p); got != tc.want {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if vs[0] != 5 {
		t.Error("Percentile sorted its input in place")
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestMedian(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median(3,1,2) = %v", got)
	}
	if got := Median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("Median(4,1,2,3) = %v", got)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tmanager\nVmPeak:\t 2000 kB\nVmRSS:\t   91234 kB\nThreads:\t12\n"
	got, err := parseRSS(bufio.NewScanner(strings.NewReader(status)))
	if err != nil || got != 91234*1024 {
		t.Errorf("parseRSS = %d, %v; want %d", got, err, 91234*1024)
	}
	if _, err := parseRSS(bufio.NewScanner(strings.NewReader("Name:\tx\n"))); err == nil {
		t.Error("parseRSS without VmRSS: no error")
	}
}

func TestParseDefaultWorkers(t *testing.T) {
	help := "Usage of manager:\n  -leader-elect\n    \tEnable leader election.\n  -max-concurrent-reconciles int\n    \tDefault number of resources of one kind reconciled at once. (default 16)\n  -reconcile-period duration\n"
	if got, err := parseDefaultWorkers(help); err != nil || got != 16 {
		t.Errorf("parseDefaultWorkers = %d, %v; want 16", got, err)
	}
	if _, err := parseDefaultWorkers("Usage:\n  -max-concurrent-reconciles int\n    \tno default here\n"); err == nil {
		t.Error("parseDefaultWorkers without a default: no error")
	}
}
