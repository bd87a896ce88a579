package release

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// driftField is one field a drift patch restores: its JSON pointer into the
// live object, where it sits in the patch (so that an ignored field can be
// taken out of it) and where in managedFields' fieldsV1 its owner is
// recorded.
type driftField struct {
	pointer string
	inPatch []any // string keys and int indexes into the patch
	managed []fieldStep
}

// fieldStep is one step into a fieldsV1 set: a field ("f:<name>") or a
// list element told by its merge key ("k:{...}" holding key=value).
type fieldStep struct {
	name  string
	key   string // set for a list element (its merge key); name is then ""
	value any
}

// driftFields lists the fields patch (a drift patch of live, driftPatch)
// restores, in a stable order. Of a strategic merge patch, lists with a
// merge key (containers, ports, env) are followed element by element into
// live, so a field of one container is named by that container's index in
// live; other lists, and every list of a JSON merge patch, are named as a
// whole. Values never leave the patch: a field is named by its path.
func driftFields(raw []byte, strategic bool, live *unstructured.Unstructured) ([]driftField, error) {
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil {
		return nil, err
	}
	var lookup strategicpatch.LookupPatchMeta
	if strategic {
		if typed, err := scheme.Scheme.New(live.GroupVersionKind()); err == nil {
			if m, err := strategicpatch.NewPatchMetaFromStruct(typed); err == nil {
				lookup = m
			}
		}
	}
	var out []driftField
	walkPatch(patch, live.Object, lookup, driftField{}, &out)
	return out, nil
}

func walkPatch(patch, live map[string]any, lookup strategicpatch.LookupPatchMeta, at driftField, out *[]driftField) {
	keys := make([]string, 0, len(patch))
	for k := range patch {
		if !strings.HasPrefix(k, "$") { // directives ($patch, $retainKeys, ...) are not fields
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		here := at.then(escapePointer(k), k, fieldStep{name: k})
		lv := live[k]
		switch pv := patch[k].(type) {
		case map[string]any:
			if lm, ok := lv.(map[string]any); ok && len(pv) > 0 {
				var sub strategicpatch.LookupPatchMeta
				if lookup != nil {
					sub, _, _ = lookup.LookupPatchMetadataForStruct(k)
				}
				walkPatch(pv, lm, sub, here, out)
				continue
			}
		case []any:
			if lookup != nil && walkMergeList(k, pv, lv, lookup, here, out) {
				continue
			}
		}
		*out = append(*out, here)
	}
}

// walkMergeList follows the elements of the patch's list k, when k is a
// list merged by a key, into the elements of live with the same key; it
// returns false for a list that is replaced whole.
func walkMergeList(k string, elems []any, lv any, lookup strategicpatch.LookupPatchMeta, at driftField, out *[]driftField) bool {
	sub, pm, err := lookup.LookupPatchMetadataForSlice(k)
	mergeKey := pm.GetPatchMergeKey()
	if err != nil || mergeKey == "" || !slices.Contains(pm.GetPatchStrategies(), "merge") {
		return false
	}
	liveList, _ := lv.([]any)
	whole := false
	for i, e := range elems {
		em, ok := e.(map[string]any)
		if !ok {
			whole = true
			continue
		}
		idx := indexByKey(liveList, mergeKey, em[mergeKey])
		if idx < 0 {
			// An element live lacks: the list is named, not an index
			// that does not exist.
			whole = true
			continue
		}
		lm, _ := liveList[idx].(map[string]any)
		rest := make(map[string]any, len(em))
		for f, v := range em {
			if f != mergeKey {
				rest[f] = v
			}
		}
		elem := at.then(strconv.Itoa(idx), patchElem{index: i, key: mergeKey}, fieldStep{key: mergeKey, value: em[mergeKey]})
		walkPatch(rest, lm, sub, elem, out)
	}
	if whole {
		*out = append(*out, at)
	}
	return true
}

func indexByKey(list []any, key string, value any) int {
	for i, e := range list {
		if m, ok := e.(map[string]any); ok && reflect.DeepEqual(jsonValue(m[key]), jsonValue(value)) {
			return i
		}
	}
	return -1
}

// jsonValue is v as encoding/json decodes it (numbers as float64), so that
// values from unstructured objects (int64) and from patches compare.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func (f driftField) then(seg string, inPatch any, step fieldStep) driftField {
	return driftField{
		pointer: f.pointer + "/" + seg,
		inPatch: append(append([]any(nil), f.inPatch...), inPatch),
		managed: append(append([]fieldStep(nil), f.managed...), step),
	}
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// actorOf names the writer of field f: of the entries of managedFields
// whose set holds f's path (or, for a field named as a whole, anything
// under it), the one written last. No entry: the field was removed, or
// written by a client that records no manager; the field is named alone.
func actorOf(f driftField, entries []metav1.ManagedFieldsEntry) status.DriftedField {
	out := status.DriftedField{Path: f.pointer}
	var best *metav1.ManagedFieldsEntry
	for i := range entries {
		e := &entries[i]
		if e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &set) != nil || !owns(set, f.managed) {
			continue
		}
		if best == nil || later(e.Time, best.Time) {
			best = e
		}
	}
	if best != nil {
		out.Manager, out.Operation, out.Subresource = best.Manager, string(best.Operation), best.Subresource
		if best.Time != nil {
			t := *best.Time
			out.Time = &t
		}
	}
	return out
}

func later(a, b *metav1.Time) bool {
	return a != nil && (b == nil || a.After(b.Time))
}

// owns tells whether the fieldsV1 set holds path.
func owns(set map[string]any, path []fieldStep) bool {
	node := set
	for _, s := range path {
		var next any
		if s.name != "" {
			next = node["f:"+s.name]
		} else {
			next = elementOf(node, s)
		}
		m, ok := next.(map[string]any)
		if !ok {
			return false
		}
		node = m
	}
	return true
}

// elementOf finds the element of a list in a fieldsV1 node by its merge
// key: "k:{...}" whose object holds key=value (server-side apply keys some
// lists by more fields than the strategic merge key, ports by containerPort
// and protocol).
func elementOf(node map[string]any, s fieldStep) any {
	want := jsonValue(s.value)
	for k, v := range node {
		if !strings.HasPrefix(k, "k:") {
			continue
		}
		var key map[string]any
		if json.Unmarshal([]byte(k[2:]), &key) == nil && reflect.DeepEqual(key[s.key], want) {
			return v
		}
	}
	return nil
}

// withoutFields returns patch (JSON) without the fields drop, and whether
// anything is left to restore.
func withoutFields(raw []byte, drop []driftField) ([]byte, bool, error) {
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil {
		return nil, false, err
	}
	for _, f := range drop {
		removeAt(patch, f.inPatch)
	}
	compact(patch)
	if !hasFields(patch) {
		return nil, false, nil
	}
	b, err := json.Marshal(patch)
	return b, err == nil, err
}

// patchElem is a step into a list of a patch: the element's index and its
// merge key.
type patchElem struct {
	index int
	key   string
}

// removeAt deletes the field at path from the patch node. A list element
// left with nothing but its merge key is set to nil (compact drops it: a
// strategic merge leaves the elements a patch does not name alone), so
// that the indexes of the other fields to remove still hold.
func removeAt(node any, path []any) {
	if len(path) == 0 {
		return
	}
	switch n := node.(type) {
	case map[string]any:
		k, _ := path[0].(string)
		if len(path) == 1 {
			delete(n, k)
			return
		}
		removeAt(n[k], path[1:])
	case []any:
		e, _ := path[0].(patchElem)
		if e.index >= len(n) {
			return
		}
		removeAt(n[e.index], path[1:])
		if m, ok := n[e.index].(map[string]any); ok {
			keys := fieldKeys(m)
			if len(keys) == 0 || (len(keys) == 1 && keys[0] == e.key) {
				n[e.index] = nil
			}
		}
	}
}

// compact drops, at any depth, the nil elements of lists and the maps and
// lists left with no field.
func compact(m map[string]any) {
	for k, v := range m {
		switch n := v.(type) {
		case map[string]any:
			compact(n)
			if !hasFields(n) {
				delete(m, k)
			}
		case []any:
			kept := n[:0]
			for _, e := range n {
				if e == nil {
					continue
				}
				if em, ok := e.(map[string]any); ok {
					compact(em)
				}
				kept = append(kept, e)
			}
			if len(kept) == 0 {
				delete(m, k)
			} else {
				m[k] = kept
			}
		}
	}
}

func fieldKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		if !strings.HasPrefix(k, "$") {
			ks = append(ks, k)
		}
	}
	return ks
}

func hasFields(m map[string]any) bool {
	return len(fieldKeys(m)) > 0
}
