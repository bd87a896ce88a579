package ship

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// opmModule is what tools/opm pins; its version keys the cache.
const opmModule = "github.com/operator-framework/operator-registry"

// opmTags build opm's cmd/opm static (CGO_ENABLED=0): containers/image
// without gpgme, no storage or btrfs/devicemapper graph drivers.
const opmTags = "containers_image_openpgp,containers_image_storage_stub,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper,json1,osusergo,netgo"

// CacheRoot is where built tools are kept between runs, outside the
// checkout: $HELM_APP_OPERATOR_CACHE, else $XDG_CACHE_HOME/helm-app-operator,
// else ~/.cache/helm-app-operator (as hack/controlplane-bins.sh).
func CacheRoot() (string, error) {
	if d := os.Getenv("HELM_APP_OPERATOR_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "helm-app-operator"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "helm-app-operator"), nil
}

// OPMVersion is the operator-registry version tools/opm/go.mod pins.
func OPMVersion(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "tools", "opm", "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == opmModule {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("tools/opm/go.mod does not require %s", opmModule)
}

// OPM returns the path of opm (operator-registry's cmd/opm at the version
// tools/opm pins) for p, building it the first time (static, -trimpath,
// stripped; minutes) into <CacheRoot>/opm/<version>/<os>-<arch>/opm. One
// builder at a time: a concurrent caller waits for the first.
func OPM(ctx context.Context, root string, p v1.Platform, goCmd string) (string, error) {
	version, err := OPMVersion(root)
	if err != nil {
		return "", err
	}
	cache, err := CacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "opm", version, p.OS+"-"+p.Architecture)
	bin := filepath.Join(dir, "opm")
	if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "opm", ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	fmt.Fprintf(os.Stderr, "ship: building opm %s for %s (first time, takes minutes; cached in %s)\n", version, p, dir)
	tmp := bin + ".tmp"
	env := append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	ldflags := "-s -w -X " + opmModule + "/cmd/opm/version.opmVersion=" + version
	if err := goBuild(ctx, goCmd, filepath.Join(root, "tools", "opm"), env, tmp,
		"-tags", opmTags, "-ldflags", ldflags, opmModule+"/cmd/opm"); err != nil {
		return "", fmt.Errorf("building opm %s for %s: %w", version, p, err)
	}
	return bin, os.Rename(tmp, bin)
}
