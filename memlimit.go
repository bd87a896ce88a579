package main

import (
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the operator
// gives Go as its soft limit (GOMEMLIMIT) when GOMEMLIMIT is not set: the
// garbage collector works harder as the heap nears it instead of letting the
// container be killed, and the rest is left for what Go does not count
// (the binary's pages, cgo, the kernel's accounting of the page cache).
const memoryLimitShare = 0.9

// cgroupMemoryFiles are where the container's memory limit is read: cgroup
// v2 first, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// containerMemoryLimit is the memory limit of the operator's cgroup in
// bytes, 0 if there is none (no file, "max", or cgroup v1's "unlimited",
// a number near 2^63).
func containerMemoryLimit(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}

// defaultMemoryLimit is the soft memory limit the operator sets when
// GOMEMLIMIT is not set: memoryLimitShare of the container's limit, or 0
// (none) without one.
func defaultMemoryLimit(files []string) int64 {
	return int64(float64(containerMemoryLimit(files)) * memoryLimitShare)
}

// collectorSettings reads the garbage collector's target and soft memory
// limit as the runtime applies them, for the start-up log: GOGC as a
// percentage ("off" when collection is off), GOMEMLIMIT in bytes ("none"
// when there is none).
func collectorSettings() (gogc, memLimit string) {
	samples := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(samples)
	gogc, memLimit = "unknown", "unknown"
	if v := samples[0].Value; v.Kind() == metrics.KindUint64 {
		// GOGC=off reads as a negative percentage stored in a uint64.
		if p := int64(v.Uint64()); p < 0 {
			gogc = "off"
		} else {
			gogc = strconv.FormatInt(p, 10)
		}
	}
	if v := samples[1].Value; v.Kind() == metrics.KindUint64 {
		if l := v.Uint64(); l >= math.MaxInt64 {
			memLimit = "none"
		} else {
			memLimit = strconv.FormatUint(l, 10)
		}
	}
	return gogc, memLimit
}
