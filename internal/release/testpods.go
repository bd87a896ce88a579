package release

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jobNameLabel is the label the Job controller sets on a Job's pods.
const jobNameLabel = "batch.kubernetes.io/job-name"

// podFailure says why the pod of the failed test hook h failed, read from
// the pod's status with one uncached list (the operator may list pods):
// for a Pod hook the pod itself, for a Job hook its newest failed pod. It
// names the pod's reason and each container's terminated reason and exit
// code, or waiting reason, never a message (a container's termination
// message may be the tail of its log). It is empty when the pod cannot be
// read or says nothing more (a hook of another kind, a pod deleted by its
// hook-delete-policy).
func (r *Runner) podFailure(ctx context.Context, h *release.Hook) string {
	if r.KubeReader == nil || ctx == nil {
		return ""
	}
	pods := &corev1.PodList{}
	var opts []client.ListOption
	switch h.Kind {
	case "Pod":
		opts = []client.ListOption{client.InNamespace(r.Namespace), client.MatchingFields{"metadata.name": h.Name}}
	case "Job":
		opts = []client.ListOption{client.InNamespace(r.Namespace), client.MatchingLabels{jobNameLabel: h.Name}}
	default:
		return ""
	}
	if err := r.KubeReader.List(ctx, pods, opts...); err != nil || len(pods.Items) == 0 {
		return ""
	}
	// The newest failed pod, else the newest.
	sort.SliceStable(pods.Items, func(i, j int) bool {
		a, b := pods.Items[i], pods.Items[j]
		if fa, fb := a.Status.Phase == corev1.PodFailed, b.Status.Phase == corev1.PodFailed; fa != fb {
			return fa
		}
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	})
	return describePod(&pods.Items[0])
}

// describePod says on one line what the status of pod tells of why it did
// not succeed: "pod t-test Failed: container check terminated with reason
// Error, exit code 1".
func describePod(pod *corev1.Pod) string {
	var parts []string
	if pod.Status.Reason != "" {
		parts = append(parts, "reason "+pod.Status.Reason)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			parts = append(parts, "not scheduled: "+c.Reason)
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, c := range statuses {
		switch {
		case c.State.Terminated != nil && (c.State.Terminated.ExitCode != 0 || c.State.Terminated.Reason != "Completed"):
			t := c.State.Terminated
			reason := t.Reason
			if reason == "" {
				reason = "none"
			}
			parts = append(parts, fmt.Sprintf("container %s terminated with reason %s, exit code %d", c.Name, reason, t.ExitCode))
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			parts = append(parts, fmt.Sprintf("container %s waiting: %s", c.Name, c.State.Waiting.Reason))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("pod %s %s: %s", pod.Name, pod.Status.Phase, strings.Join(parts, "; "))
}
