package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// profileChunk is the length of each CPU profile profileCPU fetches: a
// profile's length is fixed when it is requested, and the one under way
// when the phase ends is lost.
const profileChunk = 3

// profileCPU fetches CPU profiles of the process serving /debug/pprof at
// addr, one after another, into dir/<name>-<k>.pprof until the returned
// stop is called (or ctx ends). `go tool pprof -top dir/<name>-*.pprof`
// merges them. stop waits for the fetching to end and may be called again.
func profileCPU(ctx context.Context, dir, name, addr string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return
		}
		for k := 1; ctx.Err() == nil; k++ {
			_ = fetchProfile(ctx, filepath.Join(dir, fmt.Sprintf("%s-%02d.pprof", name, k)), addr)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// fetchProfile writes one CPU profile of profileChunk seconds to path; a
// profile cut short by ctx is not written.
func fetchProfile(ctx context.Context, path, addr string) error {
	return fetchPprof(ctx, path, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, profileChunk), "CPU profile from "+addr)
}

// fetchHeap writes the heap profile of the process serving /debug/pprof at
// addr to path, after a garbage collection (gc=1) so that its allocation
// counts are current. Two of them bracket a phase: `go tool pprof
// -sample_index=alloc_space -base start.pprof end.pprof` is what the phase
// allocated, by call stack (sampled, one in 512 KB).
func fetchHeap(ctx context.Context, path, addr string) error {
	return fetchPprof(ctx, path, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr), "heap profile from "+addr)
}

// fetchPprof writes what url serves to path (its directory made); what
// names it in an error. An answer cut short by ctx is not written.
func fetchPprof(ctx context.Context, path, url, what string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || ctx.Err() != nil {
		return fmt.Errorf("%s: %s: %v", what, resp.Status, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
