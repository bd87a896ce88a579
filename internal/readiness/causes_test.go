package readiness

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

var causeNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func withConditions(kind string, conds ...map[string]any) *unstructured.Unstructured {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	return obj("apps/v1", kind, map[string]any{"status": map[string]any{"conditions": list}})
}

func TestWorkloadCondition(t *testing.T) {
	quota := `pods "web-7d9f-" is forbidden: exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=0, limited: requests.cpu=100m`
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want Cause
	}{
		{"no conditions", withConditions("Deployment"), Cause{}},
		{"replica failure", withConditions("Deployment",
			map[string]any{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"},
			map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": quota}),
			Cause{status.ReasonFailedCreate, "FailedCreate: " + status.Foreign(quota)}},
		{"replica failure wins over the progress deadline", withConditions("Deployment",
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"web-7d9f\" has timed out progressing."},
			map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "forbidden:\n  violates PodSecurity"}),
			Cause{status.ReasonFailedCreate, "FailedCreate: " + status.Foreign("forbidden: violates PodSecurity")}},
		{"progress deadline", withConditions("Deployment",
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "timed out"}),
			Cause{status.ReasonRolloutStuck, "ProgressDeadlineExceeded: " + status.Foreign("timed out")}},
		{"a resolved failure", withConditions("ReplicaSet",
			map[string]any{"type": "ReplicaFailure", "status": "False", "reason": "FailedCreate"}), Cause{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workloadCondition(tc.u); got != tc.want {
				t.Errorf("workloadCondition() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// pod returns a pod named name, created a minute before causeNow, changed by fns.
func pod(name string, fns ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(causeNow.Add(-time.Minute))}}
	p.Status.Phase = corev1.PodRunning
	for _, fn := range fns {
		fn(&p)
	}
	return p
}

func waiting(container, image, reason, msg string, restarts int32, last *corev1.ContainerStateTerminated) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container, Image: image, RestartCount: restarts,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
			LastTerminationState: corev1.ContainerState{Terminated: last},
		})
	}
}

func pending(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }

func TestPodsCause(t *testing.T) {
	secretLog := "panic: password=hunter2 (the container's log)"
	crashed := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3, Message: secretLog}
	unsched := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	}
	for _, tc := range []struct {
		name      string
		pods      []corev1.Pod
		want      Cause
		wantStuck string
	}{
		{"all running", []corev1.Pod{pod("a"), pod("b")}, Cause{}, ""},
		{"unschedulable", []corev1.Pod{pod("a"), pod("b", unsched)},
			Cause{status.ReasonUnschedulable, "pod b: Unschedulable: " + status.Foreign("0/1 nodes are available: 1 Insufficient cpu.")}, ""},
		{"image pull names the image", []corev1.Pod{pod("a", pending, waiting("web", "registry.example/web:9.9", "ImagePullBackOff", "Back-off pulling image", 0, nil))},
			Cause{status.ReasonImagePullBackOff, "pod a: container web: ImagePullBackOff: image registry.example/web:9.9"}, ""},
		{"ErrImagePull", []corev1.Pod{pod("a", pending, waiting("web", "x:1", "ErrImagePull", "", 0, nil))},
			Cause{status.ReasonImagePullBackOff, "pod a: container web: ErrImagePull: image x:1"}, ""},
		{"crash loop: restarts, reason and exit code, never the message", []corev1.Pod{pod("a", waiting("web", "x", "CrashLoopBackOff", "back-off 5m0s restarting failed container", 7, crashed))},
			Cause{status.ReasonCrashLoopBackOff, "pod a: container web: CrashLoopBackOff, restarted 7 times, last terminated with reason Error, exit code 3"}, ""},
		{"unschedulable comes before a crash loop of another pod", []corev1.Pod{pod("a", waiting("web", "x", "CrashLoopBackOff", "", 1, crashed)), pod("b", unsched)},
			Cause{status.ReasonUnschedulable, "pod b: Unschedulable: " + status.Foreign("0/1 nodes are available: 1 Insufficient cpu.")}, ""},
		{"config error names what is missing", []corev1.Pod{pod("a", pending, waiting("web", "x", "CreateContainerConfigError", `configmap "settings" not found`, 0, nil))},
			Cause{status.ReasonContainerConfigError, "pod a: container web: CreateContainerConfigError: " + status.Foreign(`configmap "settings" not found`)}, ""},
		{"init container fails", []corev1.Pod{pod("a", pending, func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "migrate", RestartCount: 2,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: secretLog}}}}
		})}, Cause{status.ReasonInitContainerFailed, "pod a: init container migrate failed, restarted 2 times, last terminated with reason Error, exit code 1"}, ""},
		{"an init container crash-looping is a crash loop", []corev1.Pod{pod("a", pending, func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "migrate", RestartCount: 4,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: crashed}}}
		})}, Cause{status.ReasonCrashLoopBackOff, "pod a: container migrate: CrashLoopBackOff, restarted 4 times, last terminated with reason Error, exit code 3"}, ""},
		{"stuck creating: its events are asked", []corev1.Pod{pod("a", pending, waiting("web", "x", "ContainerCreating", "", 0, nil))}, Cause{}, "a"},
		{"creating for a moment is starting", []corev1.Pod{pod("a", pending, waiting("web", "x", "ContainerCreating", "", 0, nil), func(p *corev1.Pod) {
			p.CreationTimestamp = metav1.NewTime(causeNow.Add(-time.Second))
		})}, Cause{}, ""},
		{"a pod being deleted is left out", []corev1.Pod{pod("a", unsched, func(p *corev1.Pod) {
			now := metav1.NewTime(causeNow)
			p.DeletionTimestamp = &now
		})}, Cause{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stuck := podsCause(tc.pods, causeNow)
			if got != tc.want {
				t.Errorf("podsCause() = %+v\nwant          %+v", got, tc.want)
			}
			if name := ""; stuck != nil {
				name = stuck.Name
				if name != tc.wantStuck {
					t.Errorf("stuck pod %q, want %q", name, tc.wantStuck)
				}
			} else if tc.wantStuck != "" {
				t.Errorf("no stuck pod, want %q", tc.wantStuck)
			}
			if strings.Contains(got.Message, "hunter2") {
				t.Errorf("the cause quotes a termination message: %q", got.Message)
			}
		})
	}
}

func event(name, typ, reason, msg string, at time.Time) corev1.Event {
	return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: typ, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(at)}
}

func TestEventCauses(t *testing.T) {
	missing := `storageclass.storage.k8s.io "no-such-class" not found`
	events := []corev1.Event{
		event("e1", corev1.EventTypeWarning, "ProvisioningFailed", "old", causeNow.Add(-time.Hour)),
		event("e2", corev1.EventTypeWarning, "ProvisioningFailed", missing, causeNow.Add(-time.Minute)),
		event("e3", corev1.EventTypeNormal, "ExternalProvisioning", "waiting", causeNow),
	}
	if got, want := claimCause(events), (Cause{status.ReasonClaimPending, "ProvisioningFailed: " + status.Foreign(missing)}); got != want {
		t.Errorf("claimCause() = %+v, want %+v", got, want)
	}
	wffc := []corev1.Event{event("e", corev1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding", causeNow)}
	if got := claimCause(wffc); got.Reason != status.ReasonClaimPending || got.Message != "waiting for first consumer to be created before binding" {
		t.Errorf("claimCause(WaitForFirstConsumer) = %+v", got)
	}
	if got := claimCause(nil); got.known() {
		t.Errorf("claimCause(no events) = %+v, want none", got)
	}

	sts := []corev1.Event{event("s", corev1.EventTypeWarning, "FailedCreate", "create Pod db-0 in StatefulSet db failed error: pods \"db-0\" is forbidden", causeNow)}
	if got := eventCause(sts); got.Reason != status.ReasonFailedCreate || !strings.HasPrefix(got.Message, "FailedCreate: ") {
		t.Errorf("eventCause(FailedCreate) = %+v", got)
	}
	other := []corev1.Event{event("o", corev1.EventTypeWarning, "Rejected", "no", causeNow)}
	if got := eventCause(other); got.Reason != status.ReasonWarningEvent || got.Message != "Rejected: "+status.Foreign("no") {
		t.Errorf("eventCause(other) = %+v", got)
	}
	if got := eventCause(events[2:]); got.known() {
		t.Errorf("eventCause(only a Normal event) = %+v, want none", got)
	}

	mount := []corev1.Event{event("m", corev1.EventTypeWarning, "FailedMount", `MountVolume.SetUp failed for volume "data"`, causeNow)}
	if got := volumeCause("a", mount); got.Reason != status.ReasonVolumeMountFailed || got.Message != "pod a: ContainerCreating: FailedMount: "+status.Foreign(`MountVolume.SetUp failed for volume "data"`) {
		t.Errorf("volumeCause() = %+v", got)
	}
}

func TestJobCause(t *testing.T) {
	job := obj("batch/v1", "Job", map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"},
	}}})
	failed := pod("j-b", func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "work",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, Message: "secret log"}}}}
	})
	want := Cause{status.ReasonJobFailed, "Failed: BackoffLimitExceeded: " + status.Foreign("Job has reached the specified backoff limit") +
		"; pod j-b: container work terminated with reason Error, exit code 1"}
	if got := jobCause(job, []corev1.Pod{pod("j-a"), failed}); got != want {
		t.Errorf("jobCause() = %+v\nwant       %+v", got, want)
	}
	running := obj("batch/v1", "Job", map[string]any{})
	if got := jobCause(running, nil); got.known() {
		t.Errorf("jobCause(a running Job) = %+v, want none", got)
	}
}

func TestSummarizeTakesTheFirstCause(t *testing.T) {
	at := causeNow.Add(FirstRecheck)
	quota := Result{Ref: ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web"},
		Status: kstatus.InProgressStatus, Message: "0/2 replicas available; FailedCreate: exceeded quota",
		Reason: status.ReasonFailedCreate, RecheckAt: at}
	plain := result("v1", "ConfigMap", "a", kstatus.InProgressStatus, "waiting")
	s := Summarize([]Result{currentSvc, plain, quota})
	if s.Reason != status.ReasonFailedCreate || s.RecheckAt != at ||
		s.Message != "ConfigMap a: waiting; Deployment web: 0/2 replicas available; FailedCreate: exceeded quota" {
		t.Errorf("Summarize() = %+v; want reason FailedCreate, the first cause among the objects in progress", s)
	}
	// A more severe object without a cause: the generic reason stands.
	s = Summarize([]Result{goneSvc, quota})
	if s.Reason != ReasonNotFound {
		t.Errorf("Summarize() reason %s, want %s (the missing Service has no cause)", s.Reason, ReasonNotFound)
	}
}
