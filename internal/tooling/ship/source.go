// Package ship builds and pushes the three images that install the operator
// from a catalog — the operator image, the bundle image and the catalog
// image — in pure Go, with no container engine and no base image (see
// internal/tooling/image). It is tooling for make image-push, bundle-push and
// catalog-push (hack/ship), never linked into the manager.
package ship

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Source is what the images say about the code they were built from.
type Source struct {
	// Revision is the commit (empty outside a git checkout).
	Revision string
	// Time stamps every file and config of the images: SOURCE_DATE_EPOCH
	// when set, else the commit's time, else the Unix epoch. The same commit
	// gives the same digests.
	Time time.Time
}

// ReadSource reads the checkout at root's HEAD.
func ReadSource(ctx context.Context, root string) (Source, error) {
	var s Source
	out, err := exec.CommandContext(ctx, "git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if err == nil {
		f := strings.Fields(string(out))
		if len(f) == 2 {
			s.Revision = f[0]
			if sec, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				s.Time = time.Unix(sec, 0).UTC()
			}
		}
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", v)
		}
		s.Time = time.Unix(sec, 0).UTC()
	}
	if s.Time.IsZero() {
		s.Time = time.Unix(0, 0).UTC()
	}
	return s, nil
}
