package bench

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

func TestLimitsScaleWithN(t *testing.T) {
	for _, tc := range []struct {
		n               int
		settle, install time.Duration
	}{
		{5, 4 * time.Minute, 10 * time.Minute},
		{500, 5 * time.Minute, 10 * time.Minute},
		{2000, 20 * time.Minute, 20 * time.Minute},
	} {
		if got := settleLimitFor(tc.n); got != tc.settle {
			t.Errorf("settleLimitFor(%d) = %s, want %s", tc.n, got, tc.settle)
		}
		if got := installLimitFor(tc.n); got != tc.install {
			t.Errorf("installLimitFor(%d) = %s, want %s", tc.n, got, tc.install)
		}
	}
}

func TestRenderMemoryPerResource(t *testing.T) {
	var b strings.Builder
	if err := Render(&b, sampleResults(true)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| RSS idle (before any resource) | 80 MB | 60 MB | 1.33 | — | — |",
		// (90e6 − 80e6) / 1024 / 10 = 977 KB; (100e6 − 60e6) / 1024 / 10 = 3906 KB
		"| memory per resource (RSS settled − RSS idle) / N | 977 KB | 3906 KB | 0.25 | — | — |",
		// 2 s / 10 and 1 s / 10; the floor 0.5 s / 10
		"| time to all Deployed per resource | 200 ms | 100 ms | 2.00 | 4.00 | 2.00 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	res := sampleResults(true)
	res.Runs[0].RSSIdle = 0
	if err := res.Check(3); err == nil || !strings.Contains(err.Error(), "ours (defaults): no idle RSS") {
		t.Errorf("Check without an idle RSS = %v", err)
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tmanager\nVmRSS:\t  108228 kB\nRssAnon:\t   28144 kB\nRssFile:\t   80084 kB\n"
	got, err := parseStatusKB(bufio.NewScanner(strings.NewReader(status)), "RssAnon:")
	if err != nil || got != 28144*1024 {
		t.Errorf("parseStatusKB = %d, %v; want %d", got, err, 28144*1024)
	}
	if _, err := parseStatusKB(bufio.NewScanner(strings.NewReader("Name:\tx\n")), "RssAnon:"); err == nil {
		t.Error("parseStatusKB without the line: no error")
	}
}

func TestOursOnlySelectsOursAtItsDefaults(t *testing.T) {
	specs := []operatorSpec{{name: Ours, setting: Defaults}, {name: Baseline, setting: Defaults}, {name: Ours, setting: Equal}}
	if got := (Config{}).selected(specs); len(got) != 3 {
		t.Errorf("without OursOnly: %d specs, want 3", len(got))
	}
	got := (Config{OursOnly: true}).selected(specs)
	if len(got) != 1 || got[0].name != Ours || got[0].setting != Defaults {
		t.Errorf("OursOnly: %+v, want ours at its defaults alone", got)
	}
	if args := (operatorSpec{name: Ours, extra: []string{"--kube-api-qps=5", "--kube-api-burst=10"}}).args("w.yaml", "0"); !strings.Contains(strings.Join(args, " "), "--kube-api-burst=10") {
		t.Errorf("ours' args %v lack the extra flags", args)
	}
	if args := (operatorSpec{name: Baseline, extra: []string{"--kube-api-qps=5"}}).args("w.yaml", "0"); strings.Contains(strings.Join(args, " "), "qps") {
		t.Errorf("the baseline's args %v got ours' extra flags", args)
	}
}
