package status

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownedFields are the keys under .status this operator writes. Any other key
// belongs to someone else and is never touched.
var ownedFields = []string{
	"observedGeneration", "deployedRelease", "failedRelease",
	"lastAttemptedGeneration", "failures", "resources", "lastHandledRetry", "phase",
	"lastTestRun", "lastHandledTest", "drift", "valuesSources", "history",
}

// shortMessageLength is the bound used when the API server refused a status
// write for its size.
const shortMessageLength = 256

// maxWriteAttempts bounds the retries of one status write (conflicts, size).
const maxWriteAttempts = 5

// FromObject reads the operator's part of obj's status. A status that does not
// decode (someone wrote garbage) reads as empty, so the next write repairs it.
func FromObject(obj *unstructured.Unstructured) Status {
	var s Status
	raw, ok := obj.Object["status"].(map[string]any)
	if !ok {
		return s
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &s); err != nil {
		return Status{}
	}
	return s
}

// Writer patches a resource's status. Every exit of a reconcile goes through
// Write; it is the only code that writes status.
type Writer struct {
	Client client.Client
}

// Write merges s into obj's status and patches the difference to the API
// server. It writes nothing when nothing changed. Fields and conditions that
// the operator does not own are kept. A conflict re-reads the object and tries
// again, unless the name now holds another resource (another uid), whose
// status s is not: that is NotFound, as the resource s describes is gone; a
// write refused for its size is retried with shortened messages. On
// success obj holds what the server stored.
func (w Writer) Write(ctx context.Context, obj *unstructured.Unstructured, s Status) error {
	var lastErr error
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		base := obj.DeepCopy()
		changed, err := merge(obj, s)
		if err != nil {
			return err
		}
		if !changed {
			return nil
		}
		lastErr = w.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		switch {
		case lastErr == nil:
			return nil
		case apierrors.IsConflict(lastErr):
			uid := obj.GetUID()
			if err := w.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return fmt.Errorf("re-reading %s after a status conflict: %w", obj.GetName(), err)
			}
			if obj.GetUID() != uid {
				// The resource s describes was deleted and another of its
				// name created since it was read (from a cache that lagged):
				// s is not that one's status. obj stays the resource the
				// caller had, so that nothing else is done to the other.
				other := obj.GetUID()
				obj.Object = base.Object
				return apierrors.NewNotFound(schema.GroupResource{Group: obj.GroupVersionKind().Group, Resource: obj.GetKind()},
					fmt.Sprintf("%s (uid %s; uid %s holds the name now)", obj.GetName(), uid, other))
			}
		case tooLarge(lastErr):
			obj.Object = base.Object
			s = shorten(s, shortMessageLength)
		default:
			obj.Object = base.Object
			return fmt.Errorf("writing status: %w", lastErr)
		}
	}
	return fmt.Errorf("writing status: gave up after %d attempts: %w", maxWriteAttempts, lastErr)
}

// merge writes the owned part of s into obj and reports whether obj changed.
func merge(obj *unstructured.Unstructured, s Status) (bool, error) {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return false, fmt.Errorf("encoding status: %w", err)
	}
	cur, _ := obj.Object["status"].(map[string]any)
	next := runtime.DeepCopyJSON(cur)
	if next == nil {
		next = map[string]any{}
	}
	for _, k := range ownedFields {
		if v, ok := want[k]; ok {
			next[k] = v
		} else {
			delete(next, k)
		}
	}
	next["conditions"] = mergeConditions(next["conditions"], want["conditions"])
	if conds, _ := next["conditions"].([]any); len(conds) == 0 {
		delete(next, "conditions")
	}
	if equality.Semantic.DeepEqual(cur, next) {
		return false, nil
	}
	obj.Object["status"] = next
	return true, nil
}

// mergeConditions returns the owned conditions of want in the order of
// OwnedConditionTypes (Ready first, as `kubectl describe` should show it),
// followed by the conditions of other types from have, untouched and in place.
func mergeConditions(have, want any) []any {
	wantList, _ := want.([]any)
	haveList, _ := have.([]any)
	byType := map[string]any{}
	for _, c := range wantList {
		byType[condType(c)] = c
	}
	var out []any
	for _, t := range OwnedConditionTypes {
		if c, ok := byType[t]; ok {
			out = append(out, c)
		}
	}
	for _, c := range haveList {
		if !slices.Contains(OwnedConditionTypes, condType(c)) {
			out = append(out, c)
		}
	}
	return out
}

func condType(c any) string {
	m, _ := c.(map[string]any)
	t, _ := m["type"].(string)
	return t
}

func tooLarge(err error) bool {
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return apierrors.IsInvalid(err) && (strings.Contains(msg, "too long") || strings.Contains(msg, "too large"))
}

func shorten(s Status, max int) Status {
	out := *s.DeepCopy()
	for i := range out.Conditions {
		out.Conditions[i].Message = Bound(out.Conditions[i].Message, max)
	}
	if out.FailedRelease != nil {
		out.FailedRelease.Message = Bound(out.FailedRelease.Message, max)
	}
	return out
}
