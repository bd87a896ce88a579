package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, content+".txt")
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name  string
		files []string
		want  int64
	}{
		{"cgroup v2 limit of 512Mi", []string{file("536870912")}, 483183820},
		{"cgroup v2 without a limit", []string{file("max"), file("1000")}, 0},
		{"cgroup v1 unlimited", []string{missing, file("9223372036854771712")}, 0},
		{"cgroup v1 limit", []string{missing, file("1073741824")}, 966367641},
		{"no cgroup files", []string{missing}, 0},
		{"garbage", []string{file("lots")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultMemoryLimit(tc.files); got != tc.want {
				t.Errorf("defaultMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}
