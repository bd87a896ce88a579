package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// adminUser is the system:masters user whose kubeconfig Start writes.
	adminUser = "helm-app-operator-admin"
	// startTimeout bounds each of etcd and kube-apiserver starting; envtest's
	// 20s default is tight on a 2-core machine that is also compiling.
	startTimeout = 90 * time.Second
	// envStartTimeout, when set, lets envtest's own setting win.
	envStartTimeout = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"
)

// Options configures Start.
type Options struct {
	// AssetsDir holds the binaries; empty means AssetsDir() (or
	// FullAssetsDir() with Full), building them if needed.
	AssetsDir string
	// CRDDirectoryPaths are installed after the API server starts; a
	// missing path is an error.
	CRDDirectoryPaths []string
	// Full also runs kube-controller-manager, kube-scheduler and kwok with
	// one fake Node, so workloads roll out and become Ready.
	Full bool
	// WorkDir receives the kubeconfig and component logs; empty means a
	// new temporary directory, removed by a successful Stop.
	WorkDir string
	// AuditLog makes the API server write JSON audit events (level
	// Metadata; at ResponseComplete, and for a watch also at ResponseStarted)
	// to <WorkDir>/audit.log, so that the requests of each user can be
	// counted.
	AuditLog bool
	// APIServerArgs are further kube-apiserver flags, name to value (e.g.
	// "enable-priority-and-fairness": "false").
	APIServerArgs map[string]string
}

// ControlPlane is a running local control plane. Stop it when done.
type ControlPlane struct {
	// Config is the admin user's REST config.
	Config *rest.Config
	// KubeconfigPath is the admin kubeconfig (<WorkDir>/kubeconfig).
	KubeconfigPath string
	// AssetsDir is the directory the binaries were taken from.
	AssetsDir string
	// WorkDir holds the kubeconfig and the component logs.
	WorkDir string
	// AuditLogPath is the API server's audit log; empty unless
	// Options.AuditLog.
	AuditLogPath string

	env        *envtest.Environment
	logFiles   []*os.File
	components []*Process
	ownWorkDir bool
	stopped    bool
}

// Start starts etcd and kube-apiserver (and, with opts.Full, the rest of a
// cluster with one Ready fake Node) and returns once they serve. ctx bounds
// the start-up waits only; the processes run until Stop. On failure
// everything already started is stopped, and the error names the log files.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	assets, err := resolveAssets(ctx, opts)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{AssetsDir: assets, WorkDir: opts.WorkDir}
	if cp.WorkDir == "" {
		if cp.WorkDir, err = os.MkdirTemp("", "helm-app-operator-controlplane-"); err != nil {
			return nil, err
		}
		cp.ownWorkDir = true
	} else if err := os.MkdirAll(cp.WorkDir, 0o755); err != nil {
		return nil, err
	}

	if err := cp.start(ctx, opts); err != nil {
		cp.ownWorkDir = false // keep the logs the error points at
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", stopErr))
		}
		return nil, err
	}
	return cp, nil
}

// resolveAssets returns opts.AssetsDir, or finds/builds the binaries, and
// checks that every binary the mode needs is there.
func resolveAssets(ctx context.Context, opts Options) (string, error) {
	want := coreBinaries
	if opts.Full {
		want = fullBinaries
	}
	dir := opts.AssetsDir
	if dir == "" {
		var err error
		if dir, err = assetsDir(ctx, opts.Full); err != nil {
			return "", err
		}
	}
	if missing := missingBinaries(dir, want); missing != nil {
		return "", fmt.Errorf("assets directory %s lacks %s (hack/controlplane-bins.sh --full builds them)", dir, strings.Join(missing, ", "))
	}
	return dir, nil
}

func (cp *ControlPlane) start(ctx context.Context, opts Options) error {
	apiServerLog, err := cp.createLog(binAPIServer)
	if err != nil {
		return err
	}
	etcdLog, err := cp.createLog(binEtcd)
	if err != nil {
		return err
	}
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory: cp.AssetsDir,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
	}
	// Explicit paths: envtest would otherwise prefer $KUBEBUILDER_ASSETS even
	// when AssetsDir rejected it as incomplete.
	// A certificate directory of our own (envtest's temporary one is deleted
	// and re-created on stop) keeps the serving certificate across
	// RestartAPIServer, so that every kubeconfig written stays valid.
	certDir := filepath.Join(cp.WorkDir, binAPIServer)
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	cp.env.ControlPlane.APIServer = &envtest.APIServer{
		Path: filepath.Join(cp.AssetsDir, binAPIServer), Out: apiServerLog, Err: apiServerLog, CertDir: certDir,
	}
	cp.env.ControlPlane.Etcd = &envtest.Etcd{
		Path: filepath.Join(cp.AssetsDir, binEtcd), Out: etcdLog, Err: etcdLog,
	}
	cp.env.ControlPlane.KubectlPath = filepath.Join(cp.AssetsDir, binKubectl)
	if opts.AuditLog {
		if err := cp.configureAudit(); err != nil {
			return err
		}
	}
	for name, value := range opts.APIServerArgs {
		cp.env.ControlPlane.APIServer.Configure().Set(name, value)
	}
	if os.Getenv(envStartTimeout) == "" {
		cp.env.ControlPlaneStartTimeout = startTimeout
	}
	if _, err := cp.env.Start(); err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver (logs: %s, %s): %w", etcdLog.Name(), apiServerLog.Name(), err)
	}

	// A user of our own, rather than envtest's internal one, so the
	// kubeconfig on disk and Config are the same identity.
	user, err := cp.env.ControlPlane.AddUser(envtest.User{Name: adminUser, Groups: []string{"system:masters"}},
		&rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return fmt.Errorf("provisioning admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering admin kubeconfig: %w", err)
	}
	cp.KubeconfigPath = filepath.Join(cp.WorkDir, "kubeconfig")
	if err := os.WriteFile(cp.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return err
	}
	cp.Config = user.Config()

	if opts.Full {
		return cp.startCluster(ctx)
	}
	return nil
}

// AddUser provisions a user of the API server in groups (system:masters
// makes it an administrator), writes its kubeconfig to
// <WorkDir>/kubeconfig-<name> and returns the path and its REST config. Each
// process run as its own user is told apart in the audit log.
func (cp *ControlPlane) AddUser(name string, groups ...string) (string, *rest.Config, error) {
	user, err := cp.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return "", nil, fmt.Errorf("provisioning user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return "", nil, fmt.Errorf("rendering kubeconfig of %s: %w", name, err)
	}
	path := filepath.Join(cp.WorkDir, "kubeconfig-"+name)
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", nil, err
	}
	return path, user.Config(), nil
}

func (cp *ControlPlane) createLog(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(cp.WorkDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cp.logFiles = append(cp.logFiles, f)
	return f, nil
}

// Clientset returns a typed client for the admin user.
func (cp *ControlPlane) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cp.Config)
}

// Kubectl runs the built kubectl as the admin user and returns its stdout.
// A failure's error includes kubectl's stderr.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	return cp.run(ctx, binKubectl, args...)
}

// Helm runs the built helm CLI as the admin user (a full cluster's assets
// have it) and returns its stdout. A failure's error includes helm's stderr.
func (cp *ControlPlane) Helm(ctx context.Context, args ...string) (string, error) {
	return cp.run(ctx, binHelm, args...)
}

// Helm4 is Helm for the Helm 4 CLI (helm4 in a full cluster's assets), what
// a user who moved their CLI to Helm 4 runs against the same releases.
func (cp *ControlPlane) Helm4(ctx context.Context, args ...string) (string, error) {
	return cp.run(ctx, binHelm4, args...)
}

func (cp *ControlPlane) run(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.AssetsDir, bin),
		append([]string{"--kubeconfig", cp.KubeconfigPath}, args...)...)
	// helm keeps its caches and config under HOME; keep them out of the user's.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(cp.WorkDir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(cp.WorkDir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(cp.WorkDir, "helm", "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Stop stops the components (newest first), then kube-apiserver and etcd,
// and waits for every process to exit. A temporary WorkDir is removed only
// when everything stopped cleanly, so logs survive a failure. Stop is
// idempotent.
func (cp *ControlPlane) Stop() error {
	if cp.stopped {
		return nil
	}
	cp.stopped = true
	var errs []error
	for i := len(cp.components) - 1; i >= 0; i-- {
		if err := cp.components[i].Stop(stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if cp.env != nil {
		if err := cp.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
		}
	}
	for _, f := range cp.logFiles {
		_ = f.Close()
	}
	if len(errs) == 0 && cp.ownWorkDir {
		if err := os.RemoveAll(cp.WorkDir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping control plane (logs in %s): %w", cp.WorkDir, errors.Join(errs...))
	}
	return nil
}
