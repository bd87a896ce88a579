package release

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Shard is what the operator's --watch-label-selector asks of a resource's
// release (docs/sharding.md): the label keys the selector names, and the
// values the resource has for them. Its release records and its objects
// carry the same values, and none for a key the resource lacks, so that the
// caches of the shard that owns the resource hold them and no other shard's
// do. The zero Shard (no selector) changes nothing.
type Shard struct {
	Keys   []string
	Labels map[string]string
}

// differs tells whether the labels l disagree with the shard's.
func (s Shard) differs(l map[string]string) bool {
	for _, k := range s.Keys {
		want, has := s.Labels[k]
		got, ok := l[k]
		if has != ok || want != got {
			return true
		}
	}
	return false
}

// apply sets the shard's labels on l, removing the keys the resource lacks.
func (s Shard) apply(l map[string]string) map[string]string {
	if l == nil {
		l = map[string]string{}
	}
	for _, k := range s.Keys {
		if v, ok := s.Labels[k]; ok {
			l[k] = v
		} else {
			delete(l, k)
		}
	}
	return l
}

// Reshard records the shard's labels on the latest and the deployed revision
// of st when they carry others (the resource was relabelled to move it to
// this shard), in Helm's storage, without writing a new revision: the
// handover costs no upgrade. It reports whether it wrote.
func (r *Runner) Reshard(st State) (bool, error) {
	wrote := false
	rels := []*release.Release{st.Latest}
	if st.Deployed != nil && st.Deployed != st.Latest {
		rels = append(rels, st.Deployed)
	}
	for _, rel := range rels {
		if rel == nil || !r.Shard.differs(rel.Labels) {
			continue
		}
		rel.Labels = r.Shard.apply(maps.Clone(rel.Labels))
		if err := r.Client.Config().Releases.Update(rel); err != nil {
			return wrote, &Error{Reason: status.ReasonReconcileError,
				Summary: fmt.Sprintf("Recording the shard labels on release %s revision %d in Helm's storage failed", r.Name, rel.Version), Err: err}
		}
		wrote = true
	}
	return wrote, nil
}

// reshardObject moves the live object of want to the shard: it patches the
// shard's labels onto live when they differ (the resource was relabelled), and
// makes want carry them, so that the drift comparison never counts the move
// as drift. It writes nothing without a selector or when live agrees.
func (r *Runner) reshardObject(ctx context.Context, want, live *unstructured.Unstructured) error {
	if len(r.Shard.Keys) == 0 {
		return nil
	}
	want.SetLabels(r.Shard.apply(want.GetLabels()))
	if live == nil || !r.Shard.differs(live.GetLabels()) {
		return nil
	}
	l := map[string]any{}
	for _, k := range r.Shard.Keys {
		if v, ok := r.Shard.Labels[k]; ok {
			l[k] = v
		} else {
			l[k] = nil
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": l}})
	if err != nil {
		return err
	}
	writer := r.Writer
	if writer == nil {
		writer = r.Kube
	}
	if err := writer.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("moving %s %s to this shard (its labels): %w", live.GetKind(), live.GetName(), err)
	}
	return nil
}
