// Command demo is `make demo`: it starts the project's local cluster
// (kube-apiserver, etcd, kube-controller-manager, kube-scheduler and kwok with
// one fake 8-CPU node), installs the CRDs, labels the samples' namespace to
// enforce Pod Security "restricted", runs the operator binary
// (bin/manager) against it, applies config/samples and waits until they are
// Ready because their Deployments really became Available. Then it asks for
// more CPU than the node has, shows Ready=False with the pod's Unschedulable
// reason, restores the request and shows Ready=True again, printing the
// conditions at each step, and scrapes the operator's metrics with curl,
// without a token (401) and with a ServiceAccount's. Then it stops everything, or with --keep leaves it
// running until Ctrl-C and prints how to explore.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

func main() {
	keep := flag.Bool("keep", false, "Leave the control plane and the operator running until Ctrl-C.")
	workDir := flag.String("work-dir", ".demo", "Where the kubeconfig and the logs go.")
	flag.Parse()
	// The control plane's envtest logs through controller-runtime's logger:
	// without one set it prints a stack trace into the demo's output.
	ctrllog.SetLogger(logr.Discard())
	if err := run(*keep, *workDir); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	cp       *controlplane.ControlPlane
	workDir  string
	operator *exec.Cmd
	// metricsAddr is where the operator serves its metrics (HTTPS).
	metricsAddr string
}

func run(keep bool, workDir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(workDir); err != nil {
		return err
	}

	step("Starting the local cluster: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok (the first run builds them: minutes; later runs reuse them)")
	cp, err := controlplane.Start(ctx, controlplane.Options{WorkDir: workDir, Full: true})
	if err != nil {
		return err
	}
	d := &demo{cp: cp, workDir: workDir}
	defer d.stop()
	fmt.Printf("kube-apiserver at %s, kubeconfig %s\n", cp.Config.Host, cp.KubeconfigPath)

	step("Installing the CRDs")
	if err := d.kubectl(ctx, "apply", "--server-side", "-k", "config/crd"); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/nginxes.web.helmapp.io", "crd/echoes.web.helmapp.io"); err != nil {
		return err
	}

	step("Enforcing Pod Security \"restricted\" in the samples' namespace (the API server refuses any pod that does not pass it)")
	if err := d.kubectl(ctx, "label", "namespace", "default", "--overwrite",
		"pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest"); err != nil {
		return err
	}
	fmt.Println("A pod without a restricted securityContext is refused:")
	if err := d.kubectl(ctx, "run", "not-restricted", "--image=nginx", "--dry-run=server"); err == nil {
		return errors.New("the API server admitted a pod that is not restricted: PodSecurity admission is not enforcing")
	} else {
		fmt.Println(err)
	}

	step("Starting the operator (bin/manager; log in " + filepath.Join(workDir, "operator.log") + ")")
	if err := d.startOperator(); err != nil {
		return err
	}

	step("Applying config/samples")
	if err := d.kubectl(ctx, "apply", "-k", "config/samples"); err != nil {
		return err
	}

	step("Waiting until the samples are Ready: released, and their Deployments Available")
	if err := d.kubectl(ctx, "wait", "--for=condition=Ready", "--timeout=180s", "nginx/nginx-sample", "echo/echo-sample"); err != nil {
		d.show(ctx, "describe", "nginx", "nginx-sample")
		return err
	}
	d.conditions(ctx)
	d.show(ctx, "get", "deployment", "nginx-sample")

	step("Asking for more CPU than any node has (64 CPUs; the node has 8)")
	if err := d.kubectl(ctx, "patch", "nginx", "nginx-sample", "--type=merge", "-p", `{"spec":{"resources":{"requests":{"cpu":"64"}}}}`); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "wait", "--for=condition=ResourcesReady=false", "--timeout=120s", "nginx/nginx-sample"); err != nil {
		return err
	}
	d.conditions(ctx)
	d.show(ctx, "get", "pods", "-l", "app.kubernetes.io/instance=nginx-sample")

	step("Restoring the CPU request")
	if err := d.kubectl(ctx, "patch", "nginx", "nginx-sample", "--type=merge", "-p", `{"spec":{"resources":{"requests":null}}}`); err != nil {
		return err
	}
	if err := d.kubectl(ctx, "wait", "--for=condition=Ready", "--timeout=180s", "nginx/nginx-sample"); err != nil {
		return err
	}
	d.conditions(ctx)

	step("Scraping the operator's metrics (HTTPS; the API server authenticates and authorizes each scrape's token)")
	if err := d.showMetrics(ctx); err != nil {
		return err
	}

	step("kubectl get nginx,echo")
	d.show(ctx, "get", "nginx,echo")
	step("kubectl describe nginx nginx-sample")
	d.show(ctx, "describe", "nginx", "nginx-sample")
	step("The objects the chart created for nginx-sample")
	d.show(ctx, "get", "deployment,service,configmap,serviceaccount", "-l", "app.kubernetes.io/instance=nginx-sample")
	step("The Helm release, stored as the helm CLI expects")
	d.show(ctx, "get", "secrets", "-l", "owner=helm", "-L", "name,version,status")

	if keep {
		step("The demo keeps running; press Ctrl-C to stop it")
		fmt.Printf(`Explore in another terminal:
  export KUBECONFIG=%[1]s
  alias kubectl=%[2]s
  kubectl get nginx,echo
  kubectl describe nginx nginx-sample
  kubectl patch nginx nginx-sample --type=merge -p '{"spec":{"replicaCount":3}}'
  kubectl wait --for=condition=Ready nginx/nginx-sample
  tail -f %[3]s
`, cp.KubeconfigPath, filepath.Join(cp.AssetsDir, "kubectl"), filepath.Join(workDir, "operator.log"))
		<-ctx.Done()
	}
	step("Stopping the operator and the control plane")
	return nil
}

// conditions prints the sample Nginx's conditions, one line each.
func (d *demo) conditions(ctx context.Context) {
	d.show(ctx, "get", "nginx", "nginx-sample", "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status} ({.reason}) {.message}{"\n"}{end}`)
}

func (d *demo) startOperator() error {
	log, err := os.Create(filepath.Join(d.workDir, "operator.log"))
	if err != nil {
		return err
	}
	addr, err := metricsAddress()
	if err != nil {
		return err
	}
	d.metricsAddr = addr
	cmd := exec.Command("bin/manager", "--watches-file=watches.yaml",
		"--metrics-bind-address="+addr, "--health-probe-bind-address=0", "--reconcile-period=1m", "--readiness-timeout=3m")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.cp.KubeconfigPath, "WATCH_NAMESPACE=")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting bin/manager (run `make demo`, which builds it): %w", err)
	}
	d.operator = cmd
	return nil
}

func (d *demo) stop() {
	if d.operator != nil && d.operator.Process != nil {
		_ = d.operator.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- d.operator.Wait() }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = d.operator.Process.Kill()
			<-done
		}
	}
	if err := d.cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
}

// kubectl runs the project's kubectl, showing the command and its output.
func (d *demo) kubectl(ctx context.Context, args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	out, err := d.cp.Kubectl(ctx, args...)
	fmt.Print(out)
	if err != nil {
		return errors.New(strings.TrimSpace(err.Error()))
	}
	return nil
}

func (d *demo) show(ctx context.Context, args ...string) {
	if err := d.kubectl(ctx, args...); err != nil {
		fmt.Println(err)
	}
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }
