package ship_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/operator-registry/pkg/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// The operator image holds everything the manager needs: its linux/amd64
// filesystem, unpacked, runs the entrypoint the way a container runtime
// would — chrooted into it, as its USER, in its WORKDIR, with its ENV — with
// the args and env of the pushed CSV's Deployment, against the local
// cluster, and the CSV's samples become Ready with the pinned operand images.
//
// What a pod would mount is written into the filesystem: the namespace file
// of the service account (the leader election namespace) and an admin
// kubeconfig (KUBECONFIG). The probe and metrics addresses move to free
// loopback ports, as a pod's own network namespace would make them free.
func TestOperatorImageRunsFromItsFilesystem(t *testing.T) {
	s := images(t)
	ctx := context.Background()
	image, err := img.PullImage(ctx, s.operator.String(), v1.Platform{OS: "linux", Architecture: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	if err := img.Unpack(image, rootfs); err != nil {
		t.Fatal(err)
	}
	csv, err := bundle.ReadBundleCSV(s.bundle.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "image")

	kc, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, rootfs, "/var/run/secrets/kubernetes.io/serviceaccount/namespace", []byte(ns))
	writeFile(t, rootfs, "/var/run/secrets/helm-app-operator/kubeconfig", kc)

	container := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	var env []string
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['olm.targetNamespaces']":
			env = append(env, e.Name+"="+ns) // OwnNamespace: OLM's annotation names the operator's namespace
		default:
			t.Fatalf("the CSV's env %s has a source this test does not resolve", e.Name)
		}
	}
	env = append(env, "KUBECONFIG=/var/run/secrets/helm-app-operator/kubeconfig")
	health, metrics := tu.FreeAddress(t), tu.FreeAddress(t)
	// The container's command replaces the image's entrypoint, as in a pod.
	command := container.Command
	if len(command) == 0 {
		command = imageEntrypoint(t, image)
	}
	args := append(append(command, container.Args...), "--health-probe-bind-address="+health, "--metrics-bind-address="+metrics)
	logs := start(t, rootfs, image, args, env)

	// The readiness probe of the CSV's Deployment answers.
	tu.Eventually(t, time.Minute, "the readiness probe "+container.ReadinessProbe.HTTPGet.Path, func() (bool, string) {
		resp, err := http.Get("http://" + health + container.ReadinessProbe.HTTPGet.Path)
		if err != nil {
			return false, err.Error() + "; logs: " + tail(logs.String())
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	var samples []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &samples); err != nil {
		t.Fatal(err)
	}
	for _, obj := range samples {
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(ns)
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range samples {
		u := &unstructured.Unstructured{Object: obj}
		tu.WaitForCondition(t, c, u.GroupVersionKind(), ns, u.GetName(), status.TypeReady, metav1.ConditionTrue, "")
	}
	// The operands run the images the bundle pinned.
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var running []string
	for _, d := range deps.Items {
		for _, ct := range d.Spec.Template.Spec.Containers {
			running = append(running, ct.Image)
		}
	}
	for env, d := range s.operands {
		if !strings.Contains(strings.Join(running, " "), d.String()) {
			t.Errorf("no Deployment runs %s (%s); running %v", d, env, running)
		}
	}
	if t.Failed() {
		t.Logf("operator logs: %s", tail(logs.String()))
	}
}

// The catalog image serves the catalog: its opm serve, run from its
// unpacked filesystem (chrooted, as its USER, with the pre-built cache whose
// integrity opm checks), answers operator-registry's gRPC API, the one OLM's
// catalog operator queries, with the pushed bundle image and its CSV.
func TestCatalogImageServesTheBundle(t *testing.T) {
	s := images(t)
	ctx := context.Background()
	image, err := img.PullImage(ctx, s.catalog.Digest.String(), v1.Platform{OS: "linux", Architecture: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	if err := img.Unpack(image, rootfs); err != nil {
		t.Fatal(err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	addr, pprof := tu.FreeAddress(t), tu.FreeAddress(t)
	_, port, _ := strings.Cut(addr, ":")
	args := append(append(cf.Config.Entrypoint, cf.Config.Cmd...), "--port="+port, "--pprof-addr="+pprof)
	logs := start(t, rootfs, image, args, nil)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := api.NewRegistryClient(conn)
	var pkgs []string
	tu.Eventually(t, time.Minute, "opm serve to list packages", func() (bool, string) {
		stream, err := rc.ListPackages(ctx, &api.ListPackageRequest{})
		if err != nil {
			return false, err.Error() + "; logs: " + tail(logs.String())
		}
		pkgs = nil
		for {
			p, err := stream.Recv()
			if err == io.EOF {
				return true, ""
			}
			if err != nil {
				return false, err.Error() + "; logs: " + tail(logs.String())
			}
			pkgs = append(pkgs, p.GetName())
		}
	})
	if len(pkgs) != 1 || pkgs[0] != "helm-app-operator" {
		t.Fatalf("packages %v, want [helm-app-operator]", pkgs)
	}
	pkg, err := rc.GetPackage(ctx, &api.GetPackageRequest{Name: "helm-app-operator"})
	if err != nil {
		t.Fatal(err)
	}
	if pkg.DefaultChannelName != "candidate" || len(pkg.Channels) != 1 || pkg.Channels[0].CsvName != "helm-app-operator.v0.1.0" {
		t.Errorf("package: default channel %q, channels %v", pkg.DefaultChannelName, pkg.Channels)
	}
	b, err := rc.GetBundleForChannel(ctx, &api.GetBundleInChannelRequest{PkgName: "helm-app-operator", ChannelName: "candidate"})
	if err != nil {
		t.Fatal(err)
	}
	if b.BundlePath != s.bundle.Digest.String() {
		t.Errorf("the channel head's bundle image %q, want the pushed %s", b.BundlePath, s.bundle.Digest)
	}
	var csv v1alpha1.ClusterServiceVersion
	if err := json.Unmarshal([]byte(b.CsvJson), &csv); err != nil {
		t.Fatalf("the bundle carries no CSV: %v", err)
	}
	if csv.Name != "helm-app-operator.v0.1.0" || csv.Annotations["containerImage"] != s.operator.String() {
		t.Errorf("the served CSV %s names %s, want the pushed operator %s", csv.Name, csv.Annotations["containerImage"], s.operator)
	}
}

// start runs the image's args[0] chrooted into rootfs as the image's USER,
// in its WORKDIR, with its ENV plus env, until the test ends.
func start(t *testing.T, rootfs string, image v1.Image, args, env []string) *tu.SyncBuffer {
	t.Helper()
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid uint32
	if _, err := fmt.Sscanf(cf.Config.User, "%d:%d", &uid, &gid); err != nil || uid == 0 {
		t.Fatalf("the image's USER %q is not a numeric non-root uid:gid", cf.Config.User)
	}
	logs := &tu.SyncBuffer{}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append([]string{}, cf.Config.Env...), env...)
	cmd.Dir = cf.Config.WorkingDir
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: uid, Gid: gid}, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s in the image: %v", args[0], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return logs
}

func imageEntrypoint(t *testing.T, image v1.Image) []string {
	t.Helper()
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf.Config.Entrypoint
}

func writeFile(t *testing.T, rootfs, p string, data []byte) {
	t.Helper()
	full := filepath.Join(rootfs, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// tail keeps the end of a log for a failure message.
func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
