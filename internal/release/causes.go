package release

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Why the operator makes a revision. The pass knows it when it decides: it
// compares what the resource asks for with what Helm holds and what the
// status last recorded, and names each difference as a cause of the fixed
// list (status.CauseTypes). A cause names keys, objects, generations and
// versions, never a value. The causes go into status.history and, in one
// line, into Helm's description of the revision (helm history's
// DESCRIPTION).

// CauseFacts is what the causes of a revision are computed from.
type CauseFacts struct {
	// Before is Helm's storage as the pass found it; Want what the
	// resource asks for; Vals its merged values.
	Before State
	Want   Desired
	Vals   map[string]any
	// Object is the resource; Previous its status before the pass.
	Object   *unstructured.Unstructured
	Previous status.Status
	// Sources are valuesFrom's references as this pass read them.
	Sources []ValuesSource
	// Foreign is the revision someone else wrote that the plan undoes;
	// Adopted: the release became the resource's own in this pass.
	Foreign *Foreign
	Adopted bool
	// ChartFrom and ChartTo are the chart versions of the deployed
	// revision and of the watch's chart; Admitted: a staged rollout
	// admitted the chart's upgrade.
	ChartFrom, ChartTo string
	Admitted           bool
}

// Causes returns why a plan that makes a revision (an install or an
// upgrade) makes it; never empty.
func Causes(f CauseFacts) []status.Cause {
	var out []status.Cause
	add := func(typ, detail, initiator string) {
		out = append(out, status.Cause{Type: typ, Detail: detail, Initiator: initiator})
	}
	if f.Foreign != nil && !f.Foreign.Same {
		add(status.CauseForeignRevisionUndone, fmt.Sprintf("revision %d (%s) was written by someone else", f.Foreign.Revision, f.Foreign.Status), "")
	}
	if f.Adopted {
		add(status.CauseAdopted, "the release had no owner", "")
	}
	ann, _ := ParseAnnotations(f.Object.GetAnnotations())
	if ann.Retry != "" && ann.Retry != f.Previous.LastHandledRetry {
		add(status.CauseRetryRequested, fmt.Sprintf("%s set to %q", AnnotationRetry, status.Bound(ann.Retry, 63)), "")
	}
	// What the new revision differs from: the deployed revision, else the
	// latest attempt (a failed install), else nothing (a first install).
	base := f.Before.Deployed
	if base == nil && f.Before.Latest != nil && f.Before.Latest.Info != nil && f.Before.Latest.Info.Status != release.StatusUninstalled {
		base = f.Before.Latest
	}
	gen := f.Object.GetGeneration()
	prevGen := f.Previous.LastAttemptedGeneration
	sources := changedSources(f.Previous.ValuesSources, f.Sources)
	var keys []string
	// A revision someone else wrote differs from the spec by what he
	// wrote, which ForeignRevisionUndone names: not by a spec change.
	if base != nil && (f.Foreign == nil || f.Foreign.Same) {
		keys = changedKeys(base.Config, f.Vals)
	}
	switch {
	case base == nil && f.Before.Latest == nil:
		add(status.CauseSpecChanged, fmt.Sprintf("resource created at generation %d", gen), specManager(f.Object))
	case base == nil:
		add(status.CauseSpecChanged, fmt.Sprintf("installed again at generation %d after an uninstall", gen), specManager(f.Object))
	case gen != prevGen && prevGen != 0 || len(keys) > 0 && len(sources) == 0:
		d := fmt.Sprintf("generation %d→%d", prevGen, gen)
		if prevGen == 0 || prevGen == gen {
			d = fmt.Sprintf("generation %d", gen)
		}
		if len(keys) > 0 {
			d += ", values keys " + strings.Join(keys, ", ")
		}
		add(status.CauseSpecChanged, d, specManager(f.Object))
	}
	for _, s := range sources {
		add(status.CauseValuesSourceChanged, s, "")
	}
	// A revision without the label is not the operator's (adopted, or
	// written by someone else): what its chart was is not known here.
	if base != nil && base.Labels[LabelChartDigest] != "" && base.Labels[LabelChartDigest] != f.Want.ChartDigest {
		d := fmt.Sprintf("chart %s→%s", orNone(f.ChartFrom), f.ChartTo)
		if f.ChartFrom == f.ChartTo {
			d = fmt.Sprintf("chart %s rebuilt (its digest changed)", f.ChartTo)
		}
		if f.Admitted {
			d += ", admitted by the staged rollout"
		}
		add(status.CauseChartChanged, d, "")
	}
	if len(out) > 0 {
		return out
	}
	if l := f.Before.Latest; l != nil && l.Info != nil && l.Info.Status != release.StatusDeployed {
		// A failed attempt tried again (after its backoff) for the causes
		// it had: they are those of the failed revision's entry.
		for _, e := range f.Previous.History {
			if e.Revision == l.Version && len(e.Causes) > 0 {
				return append([]status.Cause{{Type: status.CauseRetryRequested,
					Detail: fmt.Sprintf("revision %d failed and is tried again", l.Version), Initiator: "helm-app-operator"}}, e.Causes...)
			}
		}
		add(status.CauseRetryRequested, fmt.Sprintf("revision %d failed and is tried again", l.Version), "helm-app-operator")
		return out
	}
	// Nothing the resource, its sources or the watch decide changed, yet
	// the digests the operator keeps did: the operator changed.
	add(status.CauseOperatorUpgraded, "the values and chart are those deployed; the operator records them otherwise now", "")
	return out
}

// changedKeys are the top-level values keys whose values differ between
// old and new, sorted: names only.
func changedKeys(old, new map[string]any) []string {
	var keys []string
	for k, v := range new {
		if ov, ok := old[k]; !ok || !reflect.DeepEqual(normalize(ov), normalize(v)) {
			keys = append(keys, k)
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	const max = 10
	if len(keys) > max {
		keys = append(keys[:max], fmt.Sprintf("and %d more", len(keys)-max))
	}
	return keys
}

// normalize makes values decoded in different ways (JSON numbers, int and
// float64) compare equal when their JSON is equal.
func normalize(v any) any {
	return Digest(v)
}

// changedSources names each reference whose object changed since the
// status last recorded it: kind/name, key, resourceVersion old→new.
func changedSources(prev []status.ValuesSource, now []ValuesSource) []string {
	old := map[string]status.ValuesSource{}
	for _, s := range prev {
		old[s.Kind+"/"+s.Name+"/"+s.ValuesKey] = s
	}
	var out []string
	for _, s := range now {
		o, ok := old[s.Ref.Kind+"/"+s.Ref.Name+"/"+s.Ref.ValuesKey]
		if s.Ref.Name == "" || ok && o.ResourceVersion == s.ResourceVersion && o.Found == s.Found {
			continue // a literal, or unchanged
		}
		from := "none"
		if ok && o.ResourceVersion != "" {
			from = o.ResourceVersion
		}
		to := s.ResourceVersion
		if to == "" {
			to = "deleted"
		}
		out = append(out, fmt.Sprintf("%s/%s key %s: resourceVersion %s→%s", s.Ref.Kind, s.Ref.Name, s.Ref.ValuesKey, from, to))
	}
	return out
}

// specManager is the field manager that last wrote the resource's spec or
// valuesFrom, when the object read carries managedFields (the cache keeps
// none: then it is unknown, and empty).
func specManager(obj *unstructured.Unstructured) string {
	var best metav1.ManagedFieldsEntry
	for _, m := range obj.GetManagedFields() {
		if m.FieldsV1 == nil || m.Subresource != "" {
			continue
		}
		raw := string(m.FieldsV1.Raw)
		if !strings.Contains(raw, `"f:spec"`) && !strings.Contains(raw, `"f:valuesFrom"`) {
			continue
		}
		if best.Manager == "" || m.Time != nil && (best.Time == nil || best.Time.Before(m.Time)) {
			best = m
		}
	}
	return best.Manager
}

// nameInitiators fills the initiator of a SpecChanged cause the resource
// as read could not name (the cache keeps no managedFields) from one
// uncached read of the resource: made only when a revision is made, never
// by a reconcile that changes nothing. A failed read leaves it unnamed.
func (r *Runner) nameInitiators(ctx context.Context, obj *unstructured.Unstructured, causes []status.Cause) {
	i := slices.IndexFunc(causes, func(c status.Cause) bool { return c.Type == status.CauseSpecChanged && c.Initiator == "" })
	reader := r.Live
	if reader == nil {
		reader = r.KubeReader
	}
	if i < 0 || len(obj.GetManagedFields()) > 0 || reader == nil {
		return
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil && live.GetUID() == obj.GetUID() {
		causes[i].Initiator = specManager(live)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
