package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Binary names inside an assets directory.
const (
	binAPIServer         = "kube-apiserver"
	binEtcd              = "etcd"
	binKubectl           = "kubectl"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
	binKwok              = "kwok"
	binHelm              = "helm"
	// binHelm4 is the Helm 4 CLI, built from its own module beside Helm 3's.
	binHelm4 = "helm4"
)

// coreBinaries are what envtest needs; fullBinaries are what Options.Full needs.
var (
	coreBinaries = []string{binAPIServer, binEtcd, binKubectl}
	fullBinaries = []string{binAPIServer, binEtcd, binKubectl, binControllerManager, binScheduler, binKwok, binHelm, binHelm4}
)

const (
	// envAssets is the variable envtest and setup-envtest use for the
	// directory holding kube-apiserver, etcd and kubectl.
	envAssets = "KUBEBUILDER_ASSETS"
	// binsScript builds missing binaries and prints the assets directory.
	binsScript = "hack/controlplane-bins.sh"
	// rootModule identifies the repository root while walking up.
	rootModule = "github.com/helmapp/helm-app-operator"
)

// AssetsDir returns a directory containing kube-apiserver, etcd and kubectl.
//
// It is $KUBEBUILDER_ASSETS when that is set and holds all three; otherwise
// it runs hack/controlplane-bins.sh, which builds whatever is missing (minutes
// the first time on a machine, well under a second afterwards) and returns the
// cached assets directory. Build progress is written to stderr.
func AssetsDir() (string, error) {
	return assetsDir(context.Background(), false)
}

// FullAssetsDir is AssetsDir for a full cluster: the directory also contains
// kube-controller-manager, kube-scheduler, kwok, the helm CLI and the Helm 4
// CLI (as helm4).
func FullAssetsDir() (string, error) {
	return assetsDir(context.Background(), true)
}

func assetsDir(ctx context.Context, full bool) (string, error) {
	want := coreBinaries
	if full {
		want = fullBinaries
	}
	if dir := os.Getenv(envAssets); dir != "" && missingBinaries(dir, want) == nil {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir, err := runBinsScript(ctx, root, full)
	if err != nil {
		return "", err
	}
	if missing := missingBinaries(dir, want); missing != nil {
		return "", fmt.Errorf("%s printed %s, which lacks %s", binsScript, dir, strings.Join(missing, ", "))
	}
	return dir, nil
}

// missingBinaries lists the names in want that are not executable files in dir.
func missingBinaries(dir string, want []string) []string {
	var missing []string
	for _, name := range want {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

// runBinsScript runs the build script and returns the last line of its stdout.
func runBinsScript(ctx context.Context, root string, full bool) (string, error) {
	script := filepath.Join(root, binsScript)
	args := []string{script}
	if full {
		args = append(args, "--full")
	}
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Dir = root
	cancelAsGroup(cmd)
	cmd.WaitDelay = 30 * time.Second
	var stdout bytes.Buffer
	stderr := &tailBuffer{limit: 4096}
	cmd.Stdout = &stdout
	// Progress stays visible (a first build takes minutes) and the tail is
	// kept for the error message.
	cmd.Stderr = io.MultiWriter(os.Stderr, stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building control plane binaries with %s: %w\n%s", script, err, stderr.String())
	}
	dir := lastLine(stdout.String())
	if dir == "" {
		return "", fmt.Errorf("%s printed no assets directory", script)
	}
	return dir, nil
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			last = line
		}
	}
	return last
}

// repoRoot walks up from the working directory to the root module's
// directory: the one whose go.mod declares rootModule. Tools modules nested
// under tools/ have their own go.mod with another module path and are
// skipped.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isRootModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod for module %s in %s or its parents; run from inside the repository or set %s", rootModule, wd, envAssets)
		}
	}
}

func isRootModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == rootModule
		}
	}
	return false
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	limit int
	buf   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	if t.limit <= 0 {
		return 0, errors.New("tailBuffer: no limit")
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }
