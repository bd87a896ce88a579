package storage

import (
	"compress/gzip"
	"runtime"
	"testing"
)

// TestGzipWritersOutliveCollections: a gzip writer given back is the one the
// next record is compressed with, even after garbage collections (a
// sync.Pool would have dropped it, and each install of a burst would then
// build ~0.8 MB of compressor state every few installs), and no more than
// gzipWritersKept are kept.
func TestGzipWritersOutliveCollections(t *testing.T) {
	var taken []*gzip.Writer
	for range gzipWritersKept + 2 {
		taken = append(taken, gzipWriters.get())
	}
	for _, w := range taken {
		gzipWriters.put(w)
	}
	if len(gzipWriters) != gzipWritersKept {
		t.Fatalf("%d writers kept after %d given back; want %d", len(gzipWriters), len(taken), gzipWritersKept)
	}
	runtime.GC()
	runtime.GC()
	for i := range gzipWritersKept {
		if w := gzipWriters.get(); w != taken[i] {
			t.Fatalf("after two collections, writer %d is a new one, not the one given back", i)
		}
	}
}
