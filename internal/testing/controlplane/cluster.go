package controlplane

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

const (
	// FakeNodeName is the one Node a full control plane has.
	FakeNodeName = "kwok-node-0"
	// kwokNodeAnnotation marks the Nodes kwok manages (see kwokArgs).
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	// clusterReadyTimeout bounds the wait for the fake Node and the
	// controller manager when ctx has no earlier deadline.
	clusterReadyTimeout = 2 * time.Minute
	pollInterval        = 250 * time.Millisecond
)

// FailPodLabel, set to "true" on a pod, makes the full cluster fail it
// once it runs: kwok terminates its containers with reason Error and exit
// code 1 and the pod turns Failed (a Job's pod so labelled fails instead of
// completing). Tests use it for a chart's test hook that fails.
const FailPodLabel = "kwok.helmapp.io/fail"

// PodStateLabel, set on a pod, makes the full cluster hold it in a state
// that never turns Ready: "ImagePullBackOff" (Pending, its containers
// waiting ImagePullBackOff) or "CrashLoopBackOff" (Running, its containers
// waiting CrashLoopBackOff after 5 restarts, the last terminated with
// reason Error, exit code 2, and a termination message standing for a log).
const PodStateLabel = "kwok.helmapp.io/state"

// kwokStages are kwok's pod stages (kwok --config): its default lifecycle
// plus the failing pods of FailPodLabel and the states of PodStateLabel.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// fakeNodeCapacity is what the scheduler sees on the fake Node. Its pods
// cost nothing (kwok runs none), so the pod count is far above a kubelet's
// 110: a package's tests share the one Node, and under load the pods of
// finished tests wait for the garbage collector while new ones come (the
// reconciler package's helm 4 tests once found "1 Too many pods").
var fakeNodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("8"),
	corev1.ResourceMemory: resource.MustParse("32Gi"),
	corev1.ResourcePods:   resource.MustParse("1000"),
}

// startCluster runs kube-controller-manager, kube-scheduler and kwok against
// the running API server, registers the fake Node and waits until it is Ready
// and the controller manager is working.
func (cp *ControlPlane) startCluster(ctx context.Context) error {
	kc := cp.KubeconfigPath
	stages := filepath.Join(cp.WorkDir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o644); err != nil {
		return fmt.Errorf("writing kwok's stages: %w", err)
	}
	specs := []struct {
		name string
		args []string
	}{
		{binControllerManager, []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			// No service account signing key is configured, and envtest
			// disables the ServiceAccount admission plugin: pods need no token.
			"--controllers=*,-serviceaccount-token", "--use-service-account-credentials=false",
			"--leader-elect=false", "--secure-port=0",
		}},
		{binScheduler, []string{
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--leader-elect=false", "--secure-port=0",
		}},
		{binKwok, []string{
			"--kubeconfig=" + kc,
			"--config=" + stages,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
			// Without a lease kwok renews nothing, the node lifecycle
			// controller declares the Node unreachable after ~40s and
			// every pod turns Ready=False.
			"--node-lease-duration-seconds=40",
			// Pod IPs outside envtest's service range (10.0.0.0/24).
			"--cidr=10.244.0.1/24",
		}},
	}
	for _, s := range specs {
		c, err := StartProcess(Command{Name: s.name, Binary: filepath.Join(cp.AssetsDir, s.name), Args: s.args, Dir: cp.WorkDir,
			LogPath: filepath.Join(cp.WorkDir, s.name+".log"), Append: true, KillWithParent: true})
		if err != nil {
			return err
		}
		cp.components = append(cp.components, c)
	}

	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	if err := createFakeNode(ctx, cs); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	if err := cp.waitFor(ctx, "node "+FakeNodeName+" Ready", func(ctx context.Context) (bool, error) {
		return nodeReady(ctx, cs)
	}); err != nil {
		return err
	}
	// The default ServiceAccount appears once the controller manager's
	// controllers run; without it, a rollout would wait on them silently.
	return cp.waitFor(ctx, "controller manager (default ServiceAccount)", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// waitFor polls cond, failing fast when a component has exited and naming
// every component log on timeout.
func (cp *ControlPlane) waitFor(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		for _, c := range cp.components {
			if err := c.Exited(); err != nil {
				return false, err
			}
		}
		return cond(ctx)
	})
	if err == nil {
		return nil
	}
	logs := make([]string, 0, len(cp.components))
	for _, c := range cp.components {
		logs = append(logs, c.LogPath())
	}
	return fmt.Errorf("waiting for %s: %w (component logs: %s)", what, err, strings.Join(logs, ", "))
}

// createFakeNode registers the Node kwok manages. Its capacity is set with a
// status update after the create, because the API server drops the status
// sent with a create and the scheduler would then see no fixed capacity.
func createFakeNode(ctx context.Context, cs kubernetes.Interface) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue},
			Labels: map[string]string{
				"kubernetes.io/hostname": FakeNodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
	}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", FakeNodeName, err)
	}
	// kwok may write the status between our create and this update; retry a
	// conflict on a fresh copy.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := created
		if node == nil {
			var err error
			if node, err = cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		created = nil
		node.Status.Capacity = fakeNodeCapacity.DeepCopy()
		node.Status.Allocatable = fakeNodeCapacity.DeepCopy()
		_, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting capacity of node %s: %w", FakeNodeName, err)
	}
	return nil
}

func nodeReady(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	node, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}
