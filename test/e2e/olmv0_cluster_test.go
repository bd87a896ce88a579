//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
	"github.com/helmapp/helm-app-operator/internal/tooling/ship"
)

// OLM v0 (operator-framework/operator-lifecycle-manager, pinned in
// tools/olmv0: the olm and catalog operators behind OperatorHub) runs here
// out of the cluster, with the admin's kubeconfig, as OLM's own developers
// run it (olm has no --kubeconfig flag: both read KUBECONFIG). What the
// cluster would give it, and what kwok cannot, is given here:
//   - the catalog: a CatalogSource with spec.address, the gRPC address of
//     the catalog image's own entrypoint (opm serve of its /configs, with
//     its pre-built cache) run on loopback from the image pulled from the
//     loopback registry. OLM creates no registry pod for an address
//     (GrpcAddressRegistryReconciler), it only connects;
//   - the bundle unpack: OLM v0 reads a bundle from a ConfigMap that a Job
//     writes, running `opm alpha bundle extract` in a pod that mounts the
//     bundle image's content. On kwok the Job's pod completes but runs
//     nothing, so the test does what its container would: for each unpack
//     Job, the bundle image the Job names (its CONTAINER_IMAGE) is pulled
//     from the loopback registry and the same opm command writes the
//     ConfigMap the Job names, as the Job's ServiceAccount (with the Role
//     OLM made for it). This keeps the catalog exactly the one OperatorHub
//     would serve (bundles by image); carrying the bundles' objects inline
//     in the catalog (olm.bundle.object, no image) would skip the unpack
//     but test a catalog nobody ships;
//   - the environment: CI unset (with it OLM's clients panic on objects
//     without its olm.managed label); olm serves its health endpoint with
//     TLS (:8443), catalog without (:8080): each binds a fixed port, and a
//     busy one is only logged; an exit 0 is restarted, as the kubelet would
//     (OLM's labeller exits 0 once it has labelled what it had to).
const (
	// olmv0Namespace is where olm and catalog run and the CatalogSource
	// lives (their --namespace: a catalog there serves every namespace).
	olmv0Namespace = "olm"
	// olmv0CatalogName is the CatalogSource.
	olmv0CatalogName = "helm-app-operator-catalog"
	// olmv0UnpackRefLabel is set on each bundle unpack Job, naming its
	// ConfigMap.
	olmv0UnpackRefLabel = "operatorframework.io/bundle-unpack-ref"
)

var (
	catalogSourceGVR = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "catalogsources"}
	subscriptionGVR  = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "subscriptions"}
	installPlanGVR   = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "installplans"}
	csvGVR           = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "clusterserviceversions"}
	operatorGroupGVR = schema.GroupVersionResource{Group: "operators.coreos.com", Version: "v1", Resource: "operatorgroups"}
)

// olmV0 is OLM v0 running against the suite's cluster, with the loopback
// registry it pulls from and the catalog servers it connects to.
type olmV0 struct {
	*olmRun
	procs []*supervised
	// catalogs are the addresses of the catalog images served (by digest).
	catalogs map[string]string
	opm      string

	mu       sync.Mutex
	unpacked map[string]bool
	// unpackErr is the first failure of the unpacker (Job name: error).
	unpackErr error
}

// newOLMv0 builds (once, cached) OLM v0 and serves the loopback registry;
// it starts nothing yet. The cleanup gives the suite its cluster back.
func newOLMv0(t *testing.T) *olmV0 {
	t.Helper()
	o := &olmV0{olmRun: &olmRun{t: t, dir: testDir(t)}, catalogs: map[string]string{}, unpacked: map[string]bool{}}
	start := time.Now()
	cmd := exec.Command(filepath.Join(suite.root, "hack", "olmv0-bins.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/olmv0-bins.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	o.bins = lines[len(lines)-1]
	t.Logf("OLM v0 binaries in %s (%s)", o.bins, time.Since(start).Round(time.Second))
	o.opm, err = ship.OPM(context.Background(), suite.root, v1.Platform{OS: "linux", Architecture: goarch()}, "go")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := img.ServeRegistry("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	o.reg = reg
	t.Cleanup(func() { _ = reg.Close() })
	t.Cleanup(o.restore)
	return o
}

// start installs OLM v0's CRDs and starts olm, catalog and the unpacker.
func (o *olmV0) start() {
	o.t.Helper()
	o.kubectl("create", "namespace", olmv0Namespace)
	o.kubectl("apply", "--server-side", "-f", filepath.Join(o.bins, "crds"))
	// Polled, not `kubectl wait`: that fails on a CRD the API server has
	// not yet given a status.
	for _, crd := range []string{"catalogsources", "subscriptions", "installplans", "clusterserviceversions", "operatorgroups",
		"operatorconditions", "olmconfigs", "operators"} {
		name := crd + ".operators.coreos.com"
		o.eventually("CRD "+name+" Established", func(ctx context.Context) (bool, string) {
			u, err := suite.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got, s := conditionsOf(u)
			return got["Established"] == "True", s
		})
	}
	tlsDir := filepath.Join(o.dir, "olm-tls")
	if err := selfSignedLoopback(tlsDir, filepath.Join(o.dir, "olm-ca")); err != nil {
		o.t.Fatal(err)
	}
	// No ClusterOperator to write to (that is OpenShift's API).
	o.supervise("catalog", "--namespace="+olmv0Namespace, "--writeStatusName=")
	o.supervise("olm", "--namespace="+olmv0Namespace, "--writeStatusName=", "--writePackageServerStatusName=",
		"--tls-cert="+filepath.Join(tlsDir, "tls.crt"), "--tls-key="+filepath.Join(tlsDir, "tls.key"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.unpackJobs(ctx)
	}()
	o.t.Cleanup(func() { cancel(); <-done })
}

// supervised is an OLM v0 process restarted when it exits 0.
type supervised struct {
	name, logPath string
	mu            sync.Mutex
	p             *controlplane.Process
	stopping      bool
	restarts      int
	err           error
	done          chan struct{}
}

func (o *olmV0) supervise(bin string, args ...string) {
	o.t.Helper()
	s := &supervised{name: bin, logPath: filepath.Join(o.dir, bin+".log"), done: make(chan struct{})}
	run := func(appendLog bool) (*controlplane.Process, error) {
		return controlplane.StartProcess(controlplane.Command{Name: bin, Binary: filepath.Join(o.bins, bin), Args: args, Dir: o.dir,
			Env:     []string{"PATH=" + os.Getenv("PATH"), "HOME=" + o.dir, "KUBECONFIG=" + suite.cp.KubeconfigPath},
			OnlyEnv: true, LogPath: s.logPath, Append: appendLog, KillWithParent: true})
	}
	p, err := run(false)
	if err != nil {
		o.t.Fatal(err)
	}
	s.p = p
	o.t.Logf("%s pid %d, log %s", bin, p.Pid(), s.logPath)
	go func() {
		defer close(s.done)
		for {
			<-p.Done()
			s.mu.Lock()
			if s.stopping || p.Err() != nil {
				if !s.stopping {
					s.err = fmt.Errorf("%s exited (%v); see %s", bin, p.Err(), s.logPath)
				}
				s.mu.Unlock()
				return
			}
			s.restarts++
			p, err = run(true)
			if err != nil {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.p = p
			s.mu.Unlock()
		}
	}()
	o.procs = append(o.procs, s)
}

func (s *supervised) stop() {
	s.mu.Lock()
	s.stopping = true
	p := s.p
	s.mu.Unlock()
	_ = p.Stop(30 * time.Second)
	<-s.done
}

// exitedV0 returns an error when an OLM v0 process has failed or the
// unpacker could not write a bundle's ConfigMap.
func (o *olmV0) exitedV0() error {
	for _, s := range o.procs {
		s.mu.Lock()
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unpackErr
}

// eventually polls check until it returns true, failing after olmDeadline
// with the last observation, or at once if OLM failed.
func (o *olmV0) eventually(what string, check func(ctx context.Context) (bool, string)) {
	o.t.Helper()
	olmEventually(o.t, o.dir, o.exitedV0, 500*time.Millisecond, what, check)
}

// serveCatalog runs the catalog image ref (by digest) as its entrypoint
// would run in the registry pod OLM does not create here: its filesystem
// pulled and unpacked, then `opm serve /configs --cache-dir=/tmp/cache`
// with those paths under the unpacked root, on a free loopback port. It
// returns the address.
func (o *olmV0) serveCatalog(ref string) string {
	o.t.Helper()
	if addr, ok := o.catalogs[ref]; ok {
		return addr
	}
	im, err := img.PullImage(context.Background(), ref, v1.Platform{OS: "linux", Architecture: goarch()})
	if err != nil {
		o.t.Fatal(err)
	}
	cf, err := im.ConfigFile()
	if err != nil {
		o.t.Fatal(err)
	}
	root := filepath.Join(o.dir, fmt.Sprintf("catalog-%d", len(o.catalogs)))
	if err := img.Unpack(im, root); err != nil {
		o.t.Fatal(err)
	}
	cmdline := append(slices.Clone(cf.Config.Entrypoint), cf.Config.Cmd...)
	for i, a := range cmdline {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
			cmdline[i] = k + "=" + filepath.Join(root, v)
		} else if strings.HasPrefix(a, "/") {
			cmdline[i] = filepath.Join(root, a)
		}
	}
	if len(cmdline) < 2 || filepath.Base(cmdline[0]) != "opm" || cmdline[1] != "serve" {
		o.t.Fatalf("catalog image %s: entrypoint %q, want opm serve", ref, cmdline)
	}
	addr := freeLoopbackAddr(o.t)
	// Outside a container: a port of its own, the termination log in its
	// root, no profiling endpoint (a fixed port).
	args := append(cmdline[1:], "--port="+portOf(addr), "--termination-log="+filepath.Join(root, "termination-log"), "--pprof-addr=")
	logPath := filepath.Join(o.dir, fmt.Sprintf("opm-serve-%d.log", len(o.catalogs)))
	p, err := controlplane.StartProcess(controlplane.Command{Name: "opm serve " + ref, Binary: cmdline[0], Args: args, Dir: root,
		Env: []string{"HOME=" + root}, OnlyEnv: true, LogPath: logPath, KillWithParent: true})
	if err != nil {
		o.t.Fatal(err)
	}
	s := &supervised{name: "opm serve", logPath: logPath, p: p, done: make(chan struct{})}
	go func() {
		<-p.Done()
		s.mu.Lock()
		if !s.stopping {
			s.err = fmt.Errorf("opm serve of %s exited (%v); see %s", ref, p.Err(), logPath)
		}
		s.mu.Unlock()
		close(s.done)
	}()
	o.procs = append(o.procs, s)
	o.catalogs[ref] = addr
	o.t.Logf("catalog %s served by its opm on %s, log %s", ref, addr, logPath)
	return addr
}

// catalogSourceManifest is the CatalogSource of the catalog served at addr.
func catalogSourceManifest(addr string) string {
	return fmt.Sprintf(`apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: %s
  namespace: %s
spec:
  sourceType: grpc
  address: %s
  displayName: helm-app-operator
  publisher: helmapp
`, olmv0CatalogName, olmv0Namespace, addr)
}

// publish points the CatalogSource at the catalog image ref (served on
// loopback) and waits until OLM is connected to it: READY at that address.
func (o *olmV0) publish(ref string) {
	o.t.Helper()
	addr := o.serveCatalog(ref)
	o.applyYAML("catalogsource", catalogSourceManifest(addr))
	o.eventually("catalogsource/"+olmv0CatalogName+" READY at "+addr, func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(catalogSourceGVR).Namespace(olmv0Namespace).Get(ctx, olmv0CatalogName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		state := nested(u.Object, "status", "connectionState", "lastObservedState")
		at := nested(u.Object, "status", "connectionState", "address")
		return state == "READY" && at == addr, fmt.Sprintf("%s at %s", state, at)
	})
}

// unpackJobs does what each bundle unpack Job's container would, once per
// Job, until ctx ends.
func (o *olmV0) unpackJobs(ctx context.Context) {
	for {
		jobs, err := suite.kube.BatchV1().Jobs(olmv0Namespace).List(ctx, metav1.ListOptions{LabelSelector: olmv0UnpackRefLabel})
		if err == nil {
			for i := range jobs.Items {
				j := &jobs.Items[i]
				o.mu.Lock()
				seen := o.unpacked[j.Name]
				o.unpacked[j.Name] = true
				o.mu.Unlock()
				if seen {
					continue
				}
				if err := o.extract(ctx, j); err != nil && ctx.Err() == nil {
					o.mu.Lock()
					if o.unpackErr == nil {
						o.unpackErr = fmt.Errorf("bundle unpack Job %s: %w", j.Name, err)
					}
					o.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// extract runs the unpack Job's extract container on this machine: the
// bundle image it names pulled and unpacked where the pod mounts it, and its
// command (`opm alpha bundle extract -m /bundle/ -n NS -c CM -z`) run with
// tools/opm's opm, as the Job's ServiceAccount.
func (o *olmV0) extract(ctx context.Context, j *batchv1.Job) error {
	spec := j.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "extract" })
	if i < 0 {
		return errors.New("no extract container")
	}
	c := spec.Containers[i]
	var image string
	for _, e := range c.Env {
		if e.Name == "CONTAINER_IMAGE" {
			image = e.Value
		}
	}
	if image == "" || len(c.Command) < 4 || c.Command[0] != "opm" {
		return fmt.Errorf("extract container: command %q, CONTAINER_IMAGE %q: not what this test knows how to run", c.Command, image)
	}
	dir := filepath.Join(o.dir, "unpack", j.Name)
	im, err := img.PullImage(ctx, image, v1.Platform{OS: "linux", Architecture: goarch()})
	if err != nil {
		return err
	}
	bundleDir := filepath.Join(dir, "bundle")
	if err := img.Unpack(im, bundleDir); err != nil {
		return err
	}
	kubeconfig, err := tokenKubeconfig(dir, j.Namespace, spec.ServiceAccountName)
	if err != nil {
		return err
	}
	args := slices.Clone(c.Command[1:])
	for k, a := range args {
		if a == "/bundle/" || a == "/bundle" {
			args[k] = bundleDir + "/"
		}
	}
	cmd := exec.CommandContext(ctx, o.opm, append(args, "--kubeconfig="+kubeconfig)...)
	cmd.Env = []string{"HOME=" + dir, "CONTAINER_IMAGE=" + image}
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(dir, "extract.log"), out, 0o644)
	if err != nil {
		return fmt.Errorf("opm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	o.t.Logf("bundle unpack Job %s/%s: its extract container run here, as its ServiceAccount: ConfigMap %s/%s written from %s",
		j.Namespace, j.Name, j.Namespace, flagValue(args, "-c"), image)
	return nil
}

// flagValue is the value following flag in args.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// nested is the string at path in obj, or "".
func nested(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// restore gives the later tests the cluster TestMain made: OLM stopped,
// what it left removed, our CRDs as TestMain applied them.
func (o *olmV0) restore() {
	ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
	defer cancel()
	run := func(args ...string) {
		if out, err := suite.cp.Kubectl(ctx, args...); err != nil {
			o.t.Errorf("restoring the suite's cluster: %v\n%s", err, out)
		}
	}
	for _, kind := range []string{"subscriptions.operators.coreos.com", "clusterserviceversions.operators.coreos.com"} {
		run("delete", kind, "-A", "--all", "--ignore-not-found", "--wait=true", "--timeout=2m")
	}
	for _, s := range slices.Backward(o.procs) {
		s.stop()
		o.t.Logf("%s stopped (restarted %d times)", s.name, s.restarts)
	}
	o.procs = nil
	run("delete", "-f", filepath.Join(o.bins, "crds"), "--ignore-not-found", "--wait=true")
	// Waited for: the next test creates it again.
	run("delete", "namespace", olmv0Namespace, "--ignore-not-found", "--wait=true", "--timeout=2m")
	// OLM v0 updated our CRDs in place (it keeps them when the operator
	// goes): TestMain's apply makes them the suite's again.
	run("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(suite.root, "config", "crd", "bases"))
}
