package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Unpack writes img's filesystem (its layers flattened, whiteouts applied)
// into dir, as a container runtime would: modes and owners as the layers
// give them. Only regular files, directories and symbolic links that stay
// inside dir are written.
func Unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	return untar(rc, dir, true)
}

// untar extracts a tar stream into dir; chown sets the entries' owners.
func untar(r io.Reader, dir string, chown bool) error {
	tr := tar.NewReader(r)
	var dirs []*tar.Header
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + hdr.Name)
		target := filepath.Join(dir, name)
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			continue
		}
		mode := os.FileMode(hdr.Mode).Perm()
		if hdr.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			dirs = append(dirs, hdr)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := os.Chmod(target, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if filepath.IsAbs(hdr.Linkname) || strings.HasPrefix(filepath.Clean(filepath.Join(filepath.Dir(name), hdr.Linkname)), "..") {
				return fmt.Errorf("unpack: symbolic link %s -> %s leaves the image", name, hdr.Linkname)
			}
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		if chown {
			if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
				return err
			}
		}
	}
	// Directory modes last: a directory without write permission could not
	// have been filled.
	for _, hdr := range dirs {
		target := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		mode := os.FileMode(hdr.Mode).Perm()
		if hdr.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
	}
	return nil
}
