package chartkit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"
)

// vendor makes dest (helm-charts/<name>) hold exactly the files of the
// staged chart dir, and returns whether anything changed. A file is written
// only when its content differs, so that adding the same chart twice changes
// nothing, with two exceptions that Helm makes differently each time without
// a difference that matters: a packaged subchart (charts/*.tgz) whose files
// are the same, and a Chart.lock that locks the same dependencies (only its
// `generated` time differs), keep the bytes already vendored.
func vendor(staged, dest string) (bool, error) {
	want := map[string][]byte{}
	err := filepath.WalkDir(staged, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(staged, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		want[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		return false, err
	}

	changed := false
	have := map[string]bool{}
	if err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dest {
			return fs.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dest, p)
		if err != nil {
			return err
		}
		have[filepath.ToSlash(rel)] = true
		return nil
	}); err != nil {
		return false, err
	}

	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dest, filepath.FromSlash(n))
		if have[n] {
			old, err := os.ReadFile(p)
			if err != nil {
				return false, err
			}
			if sameFile(n, old, want[n]) {
				continue
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(p, want[n], 0o644); err != nil {
			return false, err
		}
		changed = true
	}
	for n := range have {
		if _, ok := want[n]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(dest, filepath.FromSlash(n))); err != nil {
			return false, err
		}
		changed = true
	}
	if changed {
		removeEmptyDirs(dest)
	}
	return changed, nil
}

// sameFile tells whether the vendored bytes old may stay for the new ones.
func sameFile(name string, old, new []byte) bool {
	if bytes.Equal(old, new) {
		return true
	}
	switch {
	case name == "Chart.lock":
		return sameLock(old, new)
	case strings.HasPrefix(name, "charts/") && strings.HasSuffix(name, ".tgz"):
		a, errA := tarFiles(old)
		b, errB := tarFiles(new)
		if errA != nil || errB != nil || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// sameLock compares two Chart.lock files without their generated time.
func sameLock(a, b []byte) bool {
	var la, lb chart.Lock
	if yaml.Unmarshal(a, &la) != nil || yaml.Unmarshal(b, &lb) != nil {
		return false
	}
	if la.Digest != lb.Digest || len(la.Dependencies) != len(lb.Dependencies) {
		return false
	}
	for i := range la.Dependencies {
		x, y := la.Dependencies[i], lb.Dependencies[i]
		if x.Name != y.Name || x.Version != y.Version || x.Repository != y.Repository {
			return false
		}
	}
	return true
}

// tarFiles reads the regular files of a .tgz.
func tarFiles(data []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[h.Name] = b
	}
}

// removeEmptyDirs removes the empty folders under dir, deepest first.
func removeEmptyDirs(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != dir {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i]) // fails, as wanted, on a folder that is not empty
	}
}
