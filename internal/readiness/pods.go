package readiness

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
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
// Check states the same cause (status.ReasonUnschedulable) among the others
// of a workload's pods (see podsCause).
func PodHints(ctx context.Context, r client.Reader, namespace string, selector labels.Selector) (string, error) {
	if selector == nil {
		return "", nil
	}
	if reqs, selectable := selector.Requirements(); !selectable || len(reqs) == 0 {
		return "", nil
	}
	pods, err := listPods(ctx, r, namespace, selector)
	if err != nil {
		return "", err
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			if c := unschedulable(&pods[i]); c.known() {
				return status.Plain(c.Message), nil
			}
		}
	}
	return "", nil
}
