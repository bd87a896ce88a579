package image

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var stamp = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testFiles() []File {
	return []File{
		{Path: "/opt/app/b.txt", Mode: 0o644, Data: []byte("b")},
		Dir("/home/user", 0o775, 65532, 0),
		{Path: "/opt/app/a.sh", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
		Dir("/tmp", 0o777|os.ModeSticky, 0, 0),
	}
}

// The same files give the same layer, whatever their order; another
// timestamp gives another one.
func TestLayerIsReproducible(t *testing.T) {
	files := testFiles()
	reversed := make([]File, len(files))
	for i, f := range files {
		reversed[len(files)-1-i] = f
	}
	digest := func(fs []File, at time.Time) v1.Hash {
		l, err := Layer(fs, at)
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := digest(files, stamp), digest(reversed, stamp); a != b {
		t.Errorf("the order of the files changed the layer: %s, %s", a, b)
	}
	if a, b := digest(files, stamp), digest(files, stamp.Add(time.Second)); a == b {
		t.Error("the timestamp does not reach the layer")
	}
	if _, err := Layer(append(files, File{Path: "/opt/app/b.txt"}), stamp); err == nil {
		t.Error("a path listed twice was accepted")
	}
}

// An image unpacks as a runtime would see it: contents, modes (sticky bit
// included), owners, and the parent directories the files imply.
func TestUnpackKeepsModesAndOwners(t *testing.T) {
	im, err := Build(Spec{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Created: stamp,
		Layers: []LayerSpec{{CreatedBy: "test", Files: testFiles()}}, User: "65532:65532"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Unpack(im, dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
		uid  uint32
	}{
		{"opt", os.ModeDir | 0o755, 0},
		{"opt/app/a.sh", 0o755, 0},
		{"opt/app/b.txt", 0o644, 0},
		{"home/user", os.ModeDir | 0o775, 65532},
		{"tmp", os.ModeDir | os.ModeSticky | 0o777, 0},
	} {
		fi, err := os.Lstat(filepath.Join(dir, c.path))
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %s, want %s", c.path, fi.Mode(), c.mode)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != c.uid {
			t.Errorf("%s: owner %d, want %d", c.path, st.Uid, c.uid)
		}
	}
	cf, err := im.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !cf.Created.Time.Equal(stamp) || cf.History[0].Created.Time != stamp || cf.Config.User != "65532:65532" {
		t.Errorf("config: created %s, history %v, user %q", cf.Created, cf.History, cf.Config.User)
	}
}
