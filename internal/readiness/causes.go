package readiness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Cause is why one object is not ready, in the cluster's own words: the
// class of the cause (a reason of the status contract, e.g.
// status.ReasonFailedCreate) and one line that says it. Text the cluster
// wrote (a condition's or an event's message) is marked status.Foreign in
// Message, so that the resource's values are redacted from it before it
// reaches the status. The zero Cause means none is known.
type Cause struct {
	Reason  string
	Message string
}

func (c Cause) known() bool { return c.Reason != "" }

// stuckCreating is how long a pod may wait in ContainerCreating before its
// events are read for a volume that does not mount: shorter waits are a
// pod starting.
const stuckCreating = 30 * time.Second

// workloadCondition returns the cause a Deployment's or ReplicaSet's own
// conditions state: ReplicaFailure=True (FailedCreate: its pods were
// refused by a quota, Pod Security, a LimitRange, a webhook), which the
// Deployment controller copies from the ReplicaSet, else a Deployment's
// Progressing=False ProgressDeadlineExceeded.
func workloadCondition(u *unstructured.Unstructured) Cause {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var stuck Cause
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		typ, _ := c["type"].(string)
		st, _ := c["status"].(string)
		reason, _ := c["reason"].(string)
		msg, _ := c["message"].(string)
		switch {
		case typ == "ReplicaFailure" && st == "True":
			if reason == "" {
				reason = "ReplicaFailure"
			}
			return Cause{Reason: status.ReasonFailedCreate, Message: reason + ": " + status.Foreign(oneLine(msg))}
		case typ == "Progressing" && st == "False" && reason == "ProgressDeadlineExceeded":
			stuck = Cause{Reason: status.ReasonRolloutStuck, Message: "ProgressDeadlineExceeded: " + status.Foreign(oneLine(msg))}
		}
	}
	return stuck
}

// podsCause returns the first cause the pods state, the pods taken in
// order of name, and in this order of preference: a pod that cannot be
// scheduled, an image that cannot be pulled, a container that crash-loops,
// a container whose configuration names what does not exist, an init
// container that fails. stuck, when no cause is found, is a pod waiting in
// ContainerCreating for longer than stuckCreating at now: its events may say
// which volume it waits on (volumeCause).
//
// A container's termination message is never read: it may hold anything
// (with terminationMessagePolicy FallbackToLogsOnError, its log).
func podsCause(pods []corev1.Pod, now time.Time) (cause Cause, stuck *corev1.Pod) {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	live := pods[:0]
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	for _, find := range []func(*corev1.Pod) Cause{unschedulable, imagePull, crashLoop, configError, initFailed} {
		for i := range live {
			if c := find(&live[i]); c.known() {
				return c, nil
			}
		}
	}
	for i := range live {
		p := &live[i]
		if p.Status.Phase != corev1.PodPending || now.Sub(p.CreationTimestamp.Time) < stuckCreating {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil && w.Reason == "ContainerCreating" {
				return Cause{}, p
			}
		}
	}
	return Cause{}, nil
}

// unschedulable is a pod's PodScheduled=False condition, in the words
// PodHints has always used: "pod web-x: Unschedulable: 0/1 nodes are available: ...".
func unschedulable(p *corev1.Pod) Cause {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		msg := "pod " + p.Name + ": "
		if c.Reason != "" {
			msg += c.Reason
		} else {
			msg += "not scheduled"
		}
		if m := oneLine(c.Message); m != "" {
			msg += ": " + status.Foreign(m)
		}
		return Cause{Reason: status.ReasonUnschedulable, Message: msg}
	}
	return Cause{}
}

// allStatuses is a pod's init containers' statuses, then its containers'.
func allStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
}

func imagePull(p *corev1.Pod) Cause {
	for _, c := range allStatuses(p) {
		w := c.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull":
			return Cause{Reason: status.ReasonImagePullBackOff,
				// The image is named as the pod names it, like an object's name.
				Message: fmt.Sprintf("pod %s: container %s: %s: image %s", p.Name, c.Name, w.Reason, c.Image)}
		}
	}
	return Cause{}
}

// crashLoop says how often a container restarted and how it last ended:
// its reason and exit code, never its message.
func crashLoop(p *corev1.Pod) Cause {
	for _, c := range allStatuses(p) {
		if w := c.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
			continue
		}
		msg := fmt.Sprintf("pod %s: container %s: CrashLoopBackOff, restarted %d times", p.Name, c.Name, c.RestartCount)
		if t := c.LastTerminationState.Terminated; t != nil {
			msg += fmt.Sprintf(", last terminated with reason %s, exit code %d", orNone(t.Reason), t.ExitCode)
		}
		return Cause{Reason: status.ReasonCrashLoopBackOff, Message: msg}
	}
	return Cause{}
}

// configError is a container the kubelet cannot create from its
// configuration; the kubelet's message names the missing ConfigMap, Secret
// or key (never their data).
func configError(p *corev1.Pod) Cause {
	for _, c := range allStatuses(p) {
		w := c.State.Waiting
		if w == nil || (w.Reason != "CreateContainerConfigError" && w.Reason != "CreateContainerError") {
			continue
		}
		msg := fmt.Sprintf("pod %s: container %s: %s", p.Name, c.Name, w.Reason)
		if m := oneLine(w.Message); m != "" {
			msg += ": " + status.Foreign(m)
		}
		return Cause{Reason: status.ReasonContainerConfigError, Message: msg}
	}
	return Cause{}
}

// initFailed is an init container that terminated with an error (its
// reason and exit code) or waits to be restarted after one.
func initFailed(p *corev1.Pod) Cause {
	for _, c := range p.Status.InitContainerStatuses {
		t := c.State.Terminated
		if t == nil && c.State.Waiting != nil {
			t = c.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode == 0 {
			continue
		}
		return Cause{Reason: status.ReasonInitContainerFailed, Message: fmt.Sprintf(
			"pod %s: init container %s failed, restarted %d times, last terminated with reason %s, exit code %d",
			p.Name, c.Name, c.RestartCount, orNone(t.Reason), t.ExitCode)}
	}
	return Cause{}
}

// jobCause returns why a Job failed, from its Failed=True condition
// (BackoffLimitExceeded, DeadlineExceeded, ...) and the first of its pods
// that failed: "Failed: BackoffLimitExceeded: Job has reached the
// specified backoff limit; pod j-x: container c terminated with reason
// Error, exit code 1".
func jobCause(u *unstructured.Unstructured, pods []corev1.Pod) Cause {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		if c["type"] != "Failed" || c["status"] != "True" {
			continue
		}
		reason, _ := c["reason"].(string)
		msg, _ := c["message"].(string)
		out := "Failed: " + orNone(reason)
		if m := oneLine(msg); m != "" {
			out += ": " + status.Foreign(m)
		}
		if p := failedPod(pods); p != "" {
			out += "; " + p
		}
		return Cause{Reason: status.ReasonJobFailed, Message: out}
	}
	return Cause{}
}

// failedPod says why the first failed pod (by name) of pods failed: its
// reason, or its first container that terminated with an error.
func failedPod(pods []corev1.Pod) string {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		if p.Status.Reason != "" {
			return fmt.Sprintf("pod %s: %s", p.Name, p.Status.Reason)
		}
		for _, c := range allStatuses(&p) {
			if t := c.State.Terminated; t != nil && (t.ExitCode != 0 || t.Reason != "Completed") {
				return fmt.Sprintf("pod %s: container %s terminated with reason %s, exit code %d", p.Name, c.Name, orNone(t.Reason), t.ExitCode)
			}
		}
		return fmt.Sprintf("pod %s: Failed", p.Name)
	}
	return ""
}

// claimCause says why a PersistentVolumeClaim is Pending: its latest
// Warning event (ProvisioningFailed, FailedBinding), else that it waits for
// its first consumer (a WaitForFirstConsumer event).
func claimCause(events []corev1.Event) Cause {
	if e := latest(events, corev1.EventTypeWarning); e != nil {
		return Cause{Reason: status.ReasonClaimPending, Message: eventLine(e)}
	}
	for _, e := range events {
		if e.Reason == "WaitForFirstConsumer" {
			return Cause{Reason: status.ReasonClaimPending, Message: "waiting for first consumer to be created before binding"}
		}
	}
	return Cause{}
}

// volumeCause says which volume a pod stuck in ContainerCreating waits on:
// its latest FailedMount or FailedAttachVolume event.
func volumeCause(pod string, events []corev1.Event) Cause {
	var vol []corev1.Event
	for _, e := range events {
		if e.Reason == "FailedMount" || e.Reason == "FailedAttachVolume" {
			vol = append(vol, e)
		}
	}
	if e := latest(vol, corev1.EventTypeWarning); e != nil {
		return Cause{Reason: status.ReasonVolumeMountFailed, Message: "pod " + pod + ": ContainerCreating: " + eventLine(e)}
	}
	return Cause{}
}

// eventCause is the latest Warning event of an object, of class reason
// (a StatefulSet's or DaemonSet's FailedCreate is status.ReasonFailedCreate;
// any other, status.ReasonWarningEvent).
func eventCause(events []corev1.Event) Cause {
	e := latest(events, corev1.EventTypeWarning)
	if e == nil {
		return Cause{}
	}
	reason := status.ReasonWarningEvent
	if e.Reason == "FailedCreate" {
		reason = status.ReasonFailedCreate
	}
	return Cause{Reason: reason, Message: eventLine(e)}
}

// eventLine is "Reason: message" of an event, the message marked foreign.
func eventLine(e *corev1.Event) string {
	line := orNone(e.Reason)
	if m := oneLine(e.Message); m != "" {
		line += ": " + status.Foreign(m)
	}
	return line
}

// latest returns the event of type typ seen last (by its last timestamp,
// series or event time), nil when there is none.
func latest(events []corev1.Event, typ string) *corev1.Event {
	var best *corev1.Event
	var bestAt time.Time
	for i := range events {
		e := &events[i]
		if e.Type != typ {
			continue
		}
		if at := eventTime(e); best == nil || at.After(bestAt) || (at.Equal(bestAt) && e.Name > best.Name) {
			best, bestAt = e, at
		}
	}
	return best
}

func eventTime(e *corev1.Event) time.Time {
	at := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(at) {
		at = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(at) {
		at = e.EventTime.Time
	}
	if at.IsZero() {
		at = e.CreationTimestamp.Time
	}
	return at
}

// oneLine folds a foreign message onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
