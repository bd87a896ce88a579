package bench

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"time"
)

var metaPatch = metav1.PatchOptions{}

// specChanges changes the spec of changes resources (spread over n), one at
// a time, and returns for each the time from the change to the status that
// reports it: for ours Ready=True at the new generation, for the baseline
// Deployed=True with the new value in deployedRelease.manifest.
func specChanges(ctx context.Context, c *cluster, tr *tracker, p *progress, s operatorSpec, n, changes int) ([]float64, error) {
	out := make([]float64, 0, changes)
	for i := range changes {
		p.report("spec changes", fmt.Sprintf("%d/%d", i, changes))
		name := appName(i * n / changes)
		marker := fmt.Sprintf("change-%d", i)
		patch := fmt.Appendf(nil, `{"spec":{"value":%q}}`, marker)
		t := time.Now()
		obj, err := c.dyn.Resource(benchGVR).Namespace(benchNamespace).Patch(ctx, name, types.MergePatchType, patch, metaPatch)
		if err != nil {
			return nil, err
		}
		gen := obj.GetGeneration()
		done := func(u *unstructured.Unstructured) bool {
			return manifestHas(u, marker) && conditionTrue(u, "Deployed", 0)
		}
		if s.hasReady {
			done = func(u *unstructured.Unstructured) bool {
				og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
				return og >= gen && conditionTrue(u, "Ready", gen)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		at, err := tr.waitFor(wctx, name, done)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("waiting for the status of %s to report %s: %w", name, marker, err)
		}
		out = append(out, at.Sub(t).Seconds())
	}
	return out, nil
}
