package readiness

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxPodsListed bounds the pods PodHints reads; one pod that cannot be
// scheduled is all it reports, and a workload's pods usually share the reason.
const maxPodsListed = 100

// PodHints returns why the first pod (by name) in namespace matching selector
// cannot be scheduled, taken from its PodScheduled=False condition:
// "pod web-5d8c-x2z: Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."
// It returns "" when every pod is scheduled, and when selector selects nothing
// (rather than listing every pod of the namespace).
//
// kstatus judges a Deployment by its replica counts and cannot say that its
// pods are stuck in Pending; this is the one line that does.
func PodHints(ctx context.Context, r client.Reader, namespace string, selector labels.Selector) (string, error) {
	if selector == nil {
		return "", nil
	}
	if reqs, selectable := selector.Requirements(); !selectable || len(reqs) == 0 {
		return "", nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingLabelsSelector{Selector: selector}, client.Limit(maxPodsListed)); err != nil {
		return "", fmt.Errorf("listing the pods of %s: %w", selector, err)
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
				continue
			}
			hint := "pod " + p.Name + ": "
			if c.Reason != "" {
				hint += c.Reason
			} else {
				hint += "not scheduled"
			}
			if msg := strings.TrimSpace(c.Message); msg != "" {
				hint += ": " + msg
			}
			return hint, nil
		}
	}
	return "", nil
}
