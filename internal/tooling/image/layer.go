// Package image builds, pushes, pulls and unpacks OCI images in pure Go
// with go-containerregistry: no container engine, no base image. It is build
// tooling (make image-push, bundle-push, catalog-push; see internal/tooling/ship),
// never linked into the manager.
//
// Images are reproducible: a layer is a tar of entries sorted by path, with
// fixed owners and modes and one timestamp (the commit's), gzip-compressed by
// go-containerregistry with no timestamp of its own; configs carry the same
// timestamp. The same inputs give the same digests.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer.
type File struct {
	// Path in the image, absolute ("/opt/helm/watches.yaml").
	Path string
	// Mode holds the permission bits (and os.ModeDir, os.ModeSticky).
	Mode os.FileMode
	// UID and GID own the entry (0 when unset: root).
	UID, GID int
	// Data is a regular file's content.
	Data []byte
}

// Dir is a directory entry.
func Dir(p string, mode os.FileMode, uid, gid int) File {
	return File{Path: p, Mode: os.ModeDir | mode, UID: uid, GID: gid}
}

// Tree reads the regular files and directories under the host directory src
// as entries under dst, owned by root, with the modes normalized: 0755 for
// directories and executables, 0644 for other files. Symbolic links and other
// special files are an error (a chart or catalog has none).
func Tree(src, dst string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out = append(out, Dir(target, 0o755, 0, 0))
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			out = append(out, File{Path: target, Mode: mode, Data: data})
		default:
			return fmt.Errorf("%s: only regular files and directories go into an image, not %s", p, info.Mode().Type())
		}
		return nil
	})
	return out, err
}

// Layer makes a gzip-compressed OCI layer of files, every entry stamped with
// mtime. Parent directories that files do not list are added (0755, root);
// entries are sorted by path, so the order files come in does not matter. A
// path listed twice is an error.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" {
			continue
		}
		f.Path = p
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("layer: %s is listed twice", p)
		}
		byPath[p] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Dir(d, 0o755, 0, 0)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, p := range paths {
		f := byPath[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    int64(f.Mode.Perm()),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.Mode&os.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		if f.Mode.IsDir() {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
