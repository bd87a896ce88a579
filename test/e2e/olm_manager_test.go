//go:build e2e

// The manager of TestInstalledByOLM, run as OLM installed it, and what it
// does.

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// startManager runs the manager binary as ServiceAccount sa of the install
// namespace (a TokenRequest token) with the args and env of dep's manager
// container, from the checkout's root, which is laid out as the image's
// working directory (watches.yaml, helm-charts/); or, when o.root is set,
// that project's binary from its root. Two adjustments for a
// process outside a pod: the bind addresses get free loopback ports, and
// --leader-election-namespace is the pod's namespace, which in a pod it
// would read from its service account directory.
func (o *olmRun) startManager(apps *env, dep *appsv1.Deployment, sa, logName string) *operator {
	o.t.Helper()
	c := dep.Spec.Template.Spec.Containers[0]
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="), strings.HasPrefix(a, "--health-probe-bind-address="):
			a = a[:strings.Index(a, "=")+1] + freeLoopbackAddr(o.t)
		}
		args = append(args, a)
	}
	ns := o.installNamespace()
	args = append(args, "--leader-election-namespace="+ns)
	env := []string{"KUBECONFIG=" + saKubeconfig(o.t, o.dir, ns, sa)}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+fieldRef(dep, e.ValueFrom.FieldRef.FieldPath))
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		default:
			o.t.Fatalf("env %s of the Deployment: a source this test cannot resolve", e.Name)
		}
	}
	logPath := filepath.Join(apps.dir, logName)
	// Not the test's environment: only what the pod would have, plus PATH
	// and HOME.
	proc, err := controlplane.StartProcess(controlplane.Command{Name: "the manager", Binary: o.managerBinary(), Args: args, Dir: o.projectRoot(),
		Env: append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + apps.dir}, env...), OnlyEnv: true, LogPath: logPath, KillWithParent: true})
	if err != nil {
		o.t.Fatal(err)
	}
	m := &operator{Process: proc, logPath: logPath, args: args}
	apps.op, apps.logPath = m, logPath
	o.t.Logf("manager as %s/%s: %s (env %s), pid %d, log %s", ns, sa, strings.Join(args, " "), strings.Join(env[1:], " "), proc.Pid(), logPath)
	o.t.Cleanup(func() {
		if m.Exited() == nil {
			_ = m.stop()
		}
	})
	return m
}

// fieldRef resolves the downward API fields a manager container uses.
func fieldRef(dep *appsv1.Deployment, path string) string {
	meta := dep.Spec.Template.ObjectMeta
	if m := regexp.MustCompile(`^metadata\.annotations\['(.+)'\]$`).FindStringSubmatch(path); m != nil {
		return meta.Annotations[m[1]]
	}
	if path == "metadata.namespace" {
		return dep.Namespace
	}
	return ""
}

// checkOperandImage: the release's Deployment runs the operand image the
// bundle pinned (RELATED_IMAGE_* from OLM's Deployment reached the chart).
func (o *olmRun) checkOperandImage(apps *env, name, want string) {
	o.t.Helper()
	d, err := apps.deployment(context.Background(), name)
	if err != nil {
		o.t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
		o.t.Errorf("Deployment %s runs %s, want the bundle's pinned %s", name, got, want)
	}
}

// waitReconciled waits until manager m has finished at least n reconciles
// without error, read from its metrics endpoint with the token of a
// ServiceAccount bound to the bundle's metrics-reader ClusterRole (so the
// endpoint's authentication and authorization, done with the permissions OLM
// granted, are exercised too).
func (o *olmRun) waitReconciled(m *operator, n int) {
	o.t.Helper()
	addr := ""
	for _, a := range m.args {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			addr = v
		}
	}
	reader, ns := "metrics-reader", o.installNamespace()
	if _, err := suite.kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), reader, metav1.GetOptions{}); err != nil {
		o.kubectl("create", "serviceaccount", reader, "-n", ns)
		binding := "olm-e2e-metrics-reader"
		if ns != olmInstallNamespace {
			binding += "-" + ns
			o.t.Cleanup(func() {
				_, _ = suite.cp.Kubectl(context.Background(), "delete", "clusterrolebinding", binding, "--ignore-not-found")
			})
		}
		o.kubectl("create", "clusterrolebinding", binding, "--clusterrole=helm-app-operator-metrics-reader", "--serviceaccount="+ns+":"+reader)
	}
	token := saToken(o.t, ns, reader)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	// A settled resource's reconcile ends with RequeueAfter (its
	// reconcilePeriod): controller-runtime counts it as requeue_after.
	line := regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{[^}]*result="(?:success|requeue_after)"[^}]*\} (\d+)`)
	o.eventually(fmt.Sprintf("%d reconciles without error in the new manager's metrics", n), func(ctx context.Context) (bool, string) {
		if err := m.exited(); err != nil {
			o.t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, resp.Status
		}
		total := 0
		for _, mm := range line.FindAllStringSubmatch(string(body), -1) {
			v, _ := strconv.Atoi(mm[1])
			total += v
		}
		return total >= n, fmt.Sprintf("%d reconciles without error", total)
	})
}
