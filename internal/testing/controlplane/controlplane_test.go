package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// wantVersion is the Kubernetes version hack/controlplane-bins.sh stamps.
const wantVersion = "v1.36.3"

// start runs Start and registers Stop as cleanup (a no-op if the test
// already stopped it).
func start(t *testing.T, ctx context.Context, opts Options) *ControlPlane {
	t.Helper()
	cp, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return cp
}

func TestCoreControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // includes a first build
	defer cancel()
	workDir := t.TempDir()
	cp := start(t, ctx, Options{WorkDir: workDir})

	if got, want := cp.KubeconfigPath, filepath.Join(workDir, "kubeconfig"); got != want {
		t.Errorf("KubeconfigPath = %q, want %q", got, want)
	}
	if _, err := os.Stat(cp.KubeconfigPath); err != nil {
		t.Errorf("kubeconfig not written: %v", err)
	}

	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "controlplane-test"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	// kubectl authenticates with the kubeconfig on disk, not Config.
	out, err := cp.Kubectl(ctx, "get", "namespace", ns.Name, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "namespace/"+ns.Name {
		t.Errorf("kubectl get namespace printed %q", got)
	}

	out, err = cp.Kubectl(ctx, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("parsing kubectl version output %q: %v", out, err)
	}
	if v.ClientVersion.GitVersion != wantVersion || v.ServerVersion.GitVersion != wantVersion {
		t.Errorf("kubectl version: client %q, server %q; want both %q", v.ClientVersion.GitVersion, v.ServerVersion.GitVersion, wantVersion)
	}

	if _, err := cp.Kubectl(ctx, "get", "no-such-kind"); err == nil || !strings.Contains(err.Error(), "no-such-kind") {
		t.Errorf("Kubectl error should carry kubectl's stderr, got %v", err)
	}

	apiPID, etcdPID := checkPIDs(t, cp)

	// Restarted on the same etcd, the API server keeps its data, and the
	// kubeconfig and Config written before still reach and trust it.
	if err := cp.RestartAPIServer(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if api, etcd := checkPIDs(t, cp); api == apiPID || etcd != etcdPID {
		t.Errorf("after the API server's restart, PIDs = %d, %d; want a new API server and etcd %d", api, etcd, etcdPID)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("after the restart, Config's client cannot read the namespace created before: %v", err)
	}
	if out, err := cp.Kubectl(ctx, "get", "namespace", ns.Name, "-o", "name"); err != nil || strings.TrimSpace(out) != "namespace/"+ns.Name {
		t.Errorf("after the restart, kubectl with the kubeconfig: %q, %v", out, err)
	}
}

func TestFullControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute) // includes a first build
	defer cancel()
	cp := start(t, ctx, Options{Full: true, WorkDir: t.TempDir()})

	if _, err := cp.Kubectl(ctx, "create", "deployment", "web", "--image=nginx", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	cs, err := cp.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	// A failure bound, not a timing assertion: this takes seconds.
	var available int32
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(metav1.NamespaceDefault).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		available = d.Status.AvailableReplicas
		return available == 2, nil
	})
	if err != nil {
		pods, _ := cp.Kubectl(ctx, "get", "pods", "-o", "wide")
		t.Fatalf("deployment web: %d/2 available: %v\npods:\n%s\nlogs in %s", available, err, pods, cp.WorkDir)
	}

	checkPodStages(ctx, t, cp, cs)

	// Every child of this test binary now belongs to the control plane
	// (tests here do not run in parallel); none may survive Stop.
	before := childProcesses(t)
	if len(before) < len(fullBinaries)-3 { // all but kubectl and the two helm CLIs run
		t.Errorf("expected at least %d child processes while running, found %v", len(fullBinaries)-3, before)
	}
	if err := cp.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if after := childProcesses(t); len(after) > 0 {
		t.Errorf("processes left running after Stop: %v", after)
	}
}

// childProcesses lists "pid (command)" of this process's living children.
func childProcesses(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing processes: %v", err)
	}
	self := strconv.Itoa(os.Getpid())
	var children []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may contain spaces, so split
		// after its closing parenthesis.
		s := string(stat)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[1] != self || fields[0] == "Z" {
			continue
		}
		children = append(children, fmt.Sprintf("%s %s", e.Name(), s[strings.IndexByte(s, '('):end+1]))
	}
	return children
}

// checkPodStages checks kwok's pod stages (kwok-stages.yaml): a pod runs and
// stays Running, a Job's pod completes, and a pod or a Job's pod labelled
// FailPodLabel fails with its container terminated (Error, exit code 1).
func checkPodStages(ctx context.Context, t *testing.T, cp *ControlPlane, cs kubernetes.Interface) {
	t.Helper()
	pod := func(name, labels string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, labels: {%s}}\nspec:\n  restartPolicy: Never\n  containers: [{name: c, image: busybox}]\n", name, labels)
	}
	job := func(name, labels string) string {
		return fmt.Sprintf("apiVersion: batch/v1\nkind: Job\nmetadata: {name: %s}\nspec:\n  backoffLimit: 0\n  template:\n    metadata: {labels: {%s}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n", name, labels)
	}
	fail := FailPodLabel + `: "true"`
	manifest := strings.Join([]string{pod("runs", ""), pod("fails", fail), job("completes", ""), job("fails", fail)}, "---\n")
	path := filepath.Join(t.TempDir(), "stages.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cp.Kubectl(ctx, "apply", "-f", path); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	jobState := func(name string) string {
		j, err := cs.BatchV1().Jobs(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("succeeded=%d failed=%d", j.Status.Succeeded, j.Status.Failed)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		runs, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "runs", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		fails, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "fails", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		term := "none"
		if st := fails.Status.ContainerStatuses; len(st) == 1 && st[0].State.Terminated != nil {
			term = fmt.Sprintf("%s/%d", st[0].State.Terminated.Reason, st[0].State.Terminated.ExitCode)
		}
		last = fmt.Sprintf("pod runs %s; pod fails %s terminated %s; job completes %s; job fails %s",
			runs.Status.Phase, fails.Status.Phase, term, jobState("completes"), jobState("fails"))
		return runs.Status.Phase == corev1.PodRunning && fails.Status.Phase == corev1.PodFailed && term == "Error/1" &&
			jobState("completes") == "succeeded=1 failed=0" && jobState("fails") == "succeeded=0 failed=1", nil
	})
	if err != nil {
		t.Fatalf("kwok's pod stages: %v; last seen: %s", err, last)
	}
}

// checkPIDs asserts that PIDs names a kube-apiserver and an etcd process.
func checkPIDs(t *testing.T, cp *ControlPlane) (apiServer, etcd int) {
	t.Helper()
	apiServer, etcd, err := cp.PIDs()
	if err != nil {
		t.Fatalf("PIDs: %v", err)
	}
	for pid, want := range map[int]string{apiServer: binAPIServer, etcd: binEtcd} {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || filepath.Base(exe) != want {
			t.Errorf("PIDs: %d is %q (%v), want %s", pid, exe, err, want)
		}
	}
	return apiServer, etcd
}
