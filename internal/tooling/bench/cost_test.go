package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 123 0 0 0 250 75 3 4 20 0 12 0 99 1000 200 18446744073709551615\n"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3.25 {
		t.Errorf("parseStatCPU = %v, %v; want 3.25 s (250 + 75 ticks)", got, err)
	}
	if _, err := parseStatCPU("4242 (x) S 1"); err == nil {
		t.Error("a short stat line was accepted")
	}
	// The running test's own line parses.
	if _, err := processCPU(os.Getpid()); err != nil {
		t.Errorf("processCPU(self): %v", err)
	}
}

func TestParseTotalAlloc(t *testing.T) {
	profile := "heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n\n# runtime.MemStats\n# Alloc = 1000\n# TotalAlloc = 123456789\n# Sys = 5\n"
	if got, err := parseTotalAlloc(strings.NewReader(profile)); err != nil || got != 123456789 {
		t.Errorf("parseTotalAlloc = %d, %v; want 123456789", got, err)
	}
	if _, err := parseTotalAlloc(strings.NewReader("heap profile: 0\n")); err == nil {
		t.Error("a profile without TotalAlloc was accepted")
	}
}

func TestBenchProcessCountsAllocation(t *testing.T) {
	_, a0, err := benchProcess(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	sink = make([]byte, 1<<20)
	_, a1, err := benchProcess(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if a1-a0 < 1<<20 {
		t.Errorf("allocating 1 MiB moved /gc/heap/allocs:bytes by %d", a1-a0)
	}
}

var sink []byte
