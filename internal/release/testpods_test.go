package release

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// describePod names what a failed test pod's status tells (its reason,
// scheduling, containers' terminated reasons and exit codes, waiting
// reasons) and never a message, which may be the tail of a log.
func TestDescribePod(t *testing.T) {
	terminated := func(name, reason string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: reason, ExitCode: code, Message: "log: password=hunter2"}}}
	}
	for _, tt := range []struct {
		name string
		st   corev1.PodStatus
		want string
	}{
		{"a container exited 1", corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{terminated("check", "Error", 1), terminated("side", "Completed", 0)}},
			"pod p Failed: container check terminated with reason Error, exit code 1"},
		{"an init container failed, the main one waits", corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{terminated("init", "OOMKilled", 137)},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "check", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing", Message: "secret"}}}}},
			"pod p Failed: container init terminated with reason OOMKilled, exit code 137; container check waiting: PodInitializing"},
		{"evicted", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on memory"},
			"pod p Failed: reason Evicted"},
		{"never scheduled", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes"}}},
			"pod p Pending: not scheduled: Unschedulable"},
		{"nothing to say", corev1.PodStatus{Phase: corev1.PodRunning}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := describePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tt.st}); got != tt.want {
				t.Errorf("describePod = %q, want %q", got, tt.want)
			}
		})
	}
}
