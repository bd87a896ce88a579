package operator_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/helmapp/helm-app-operator/internal/operator"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// The environment of the child process of TestCrashAfterTheKthWrite.
const (
	crashChildKubeconfig = "CRASHPOINT_TEST_CHILD_KUBECONFIG"
	crashChildNamespace  = "CRASHPOINT_TEST_CHILD_NAMESPACE"
	// crashChildWrites is how many ConfigMaps the child creates.
	crashChildWrites = 5
)

// Without its variables, the manager's REST config is the one it was
// given: no transport is wrapped, nothing is counted, nothing can kill the
// process. With one of them, the same New installs the crash point.
func TestCrashPointOnlyWithItsVariables(t *testing.T) {
	ws, err := watches.Load(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	newManagerConfig := func() (wrapped bool) {
		t.Helper()
		mgr, err := operator.New(cfg, operator.Config{MaxConcurrentReconciles: 1, MetricsBindAddress: "0",
			HealthProbeBindAddress: "0", SkipNameValidation: true}, ws)
		if err != nil {
			t.Fatal(err)
		}
		return mgr.GetConfig().WrapTransport != nil
	}
	if cfg.WrapTransport != nil {
		t.Fatal("the test's REST config already wraps its transport: the test proves nothing")
	}
	t.Setenv(operator.CrashAfterWriteEnv, "")
	t.Setenv(operator.WriteLogEnv, "")
	if newManagerConfig() {
		t.Errorf("without %s and %s, the manager's REST config wraps its transport", operator.CrashAfterWriteEnv, operator.WriteLogEnv)
	}
	t.Setenv(operator.WriteLogEnv, filepath.Join(t.TempDir(), "writes.log"))
	if !newManagerConfig() {
		t.Errorf("with %s set, the manager's REST config does not wrap its transport: the crash point is not installed", operator.WriteLogEnv)
	}

	same, err := operator.WithCrashPoint(cfg, func(string) string { return "" })
	if err != nil || same != cfg {
		t.Errorf("WithCrashPoint without its variables = %p, %v; want the config itself (%p)", same, err, cfg)
	}
	for _, bad := range []string{"0", "-1", "two"} {
		if _, err := operator.WithCrashPoint(cfg, func(k string) string {
			if k == operator.CrashAfterWriteEnv {
				return bad
			}
			return ""
		}); err == nil {
			t.Errorf("%s=%s accepted", operator.CrashAfterWriteEnv, bad)
		}
	}
}

// A process with HELM_APP_OPERATOR_TEST_CRASH_AFTER_WRITE=3 is killed with
// SIGKILL right after its third write: the child below reads, records an
// event and creates a ConfigMap five times; the first three ConfigMaps
// exist, the fourth does not, and the write log lists the three creates,
// not the reads nor the events.
func TestCrashAfterTheKthWrite(t *testing.T) {
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "crashpoint")
	log := filepath.Join(t.TempDir(), "writes.log")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildKubeconfig+"="+cp.KubeconfigPath, crashChildNamespace+"="+ns,
		operator.CrashAfterWriteEnv+"=3", operator.WriteLogEnv+"="+log)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the child exited with %v, want killed by SIGKILL\n%s", err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child exited with %v, want killed by SIGKILL\n%s", err, out)
	}

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= crashChildWrites; i++ {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), fmt.Sprintf("crash-%d", i), metav1.GetOptions{})
		switch {
		case i <= 3 && err != nil:
			t.Errorf("ConfigMap crash-%d, written before the crash point: %v", i, err)
		case i > 3 && !apierrors.IsNotFound(err):
			t.Errorf("ConfigMap crash-%d, after the crash point: %v, want not found", i, err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("%d POST /api/v1/namespaces/%s/configmaps 201", i, ns))
	}
	if got := strings.Split(strings.TrimSpace(string(b)), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("write log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// crashChild is the child of TestCrashAfterTheKthWrite: through a config
// with the crash point, it reads a ConfigMap, records an event and creates
// a ConfigMap, crashChildWrites times. It returns (and exits) only if it was
// not killed.
func crashChild() int {
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv(crashChildKubeconfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if rc, err = operator.WithCrashPoint(rc, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ns := os.Getenv(crashChildNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 1; i <= crashChildWrites; i++ {
		name := fmt.Sprintf("crash-%d", i)
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "reading %s: %v\n", name, err)
			return 1
		}
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: name}, Reason: "Creating", Message: "creating " + name, Type: corev1.EventTypeNormal}
		if _, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			fmt.Fprintf(os.Stderr, "recording an event: %v\n", err)
			return 1
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			fmt.Fprintf(os.Stderr, "creating %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintln(os.Stderr, "the child was not killed")
	return 0
}
