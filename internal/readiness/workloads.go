package readiness

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// replicaReasons are the reasons kstatus gives when a workload's replica
// counts are short; only then do the counts explain the status, and
// workloadMessage replaces kstatus's terse message ("Available: 1/3") with its
// own. kstatus's other messages (a generation not yet observed, a revision
// mismatch) are kept as they are.
var replicaReasons = map[string]bool{
	"LessReplicas": true, "LessUpdated": true, "LessAvailable": true, "LessReady": true,
	"ExtraPods": true, "LessCurrent": true, "PartitionRollout": true,
}

// workloadMessage returns one line on a Deployment, StatefulSet or DaemonSet
// that kstatus found not Current: "1/3 replicas available, 2/3 updated". For a
// Deployment past its progress deadline it adds so. ok is false when kstatus's
// message should stand.
func workloadMessage(u *unstructured.Unstructured, res *kstatus.Result) (string, bool) {
	if !isWorkload(u) {
		return "", false
	}
	reason := ""
	if len(res.Conditions) > 0 {
		reason = res.Conditions[0].Reason
	}
	switch {
	case res.Status == kstatus.InProgressStatus && replicaReasons[reason]:
		return replicaCounts(u), true
	case res.Status == kstatus.FailedStatus && u.GetKind() == "Deployment" && reason == "ProgressDeadlineExceeded":
		return replicaCounts(u) + "; progress deadline exceeded", true
	}
	return "", false
}

// replicaCounts says how many replicas are available (ready, for a
// StatefulSet, which has no minReadySeconds of its own to wait), and what else
// is short.
func replicaCounts(u *unstructured.Unstructured) string {
	n := func(path ...string) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, path...)
		return v
	}
	switch u.GetKind() {
	case "DaemonSet":
		desired := n("status", "desiredNumberScheduled")
		msg := fmt.Sprintf("%d/%d pods available", n("status", "numberAvailable"), desired)
		if cur := n("status", "currentNumberScheduled"); cur < desired {
			msg += fmt.Sprintf(", %d/%d scheduled", cur, desired)
		}
		if upd := n("status", "updatedNumberScheduled"); upd < desired {
			msg += fmt.Sprintf(", %d/%d updated", upd, desired)
		}
		return msg
	case "StatefulSet":
		spec := specReplicas(u)
		msg := fmt.Sprintf("%d/%d replicas ready", n("status", "readyReplicas"), spec)
		if upd := n("status", "updatedReplicas"); upd < spec {
			msg += fmt.Sprintf(", %d/%d updated", upd, spec)
		}
		return msg + extraReplicas(n("status", "replicas"), spec)
	default: // Deployment
		spec := specReplicas(u)
		msg := fmt.Sprintf("%d/%d replicas available", n("status", "availableReplicas"), spec)
		if upd := n("status", "updatedReplicas"); upd < spec {
			msg += fmt.Sprintf(", %d/%d updated", upd, spec)
		}
		return msg + extraReplicas(n("status", "replicas"), spec)
	}
}

// specReplicas is spec.replicas, 1 when unset as the controllers default it.
func specReplicas(u *unstructured.Unstructured) int64 {
	v, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		return 1
	}
	return v
}

func extraReplicas(have, want int64) string {
	if have <= want {
		return ""
	}
	return fmt.Sprintf(", %d old pending termination", have-want)
}

func isWorkload(u *unstructured.Unstructured) bool {
	gk := u.GroupVersionKind().GroupKind()
	if gk.Group != "apps" {
		return false
	}
	switch gk.Kind {
	case "Deployment", "StatefulSet", "DaemonSet":
		return true
	}
	return false
}

// podSelector returns the selector of a workload's pods; ok is false when it
// has none that selects anything.
func podSelector(u *unstructured.Unstructured) (labels.Selector, bool) {
	raw, found, _ := unstructured.NestedMap(u.Object, "spec", "selector")
	if !found {
		return nil, false
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || sel.Empty() {
		return nil, false
	}
	return sel, true
}
