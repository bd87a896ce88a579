package release

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
)

// manifestObjects decodes the objects of a release manifest
// (readiness.DecodeManifest, with the mapper of c), a Secret's stringData
// moved into its data as the API server stores it.
func manifestObjects(manifest, ns string, c client.Client) ([]*unstructured.Unstructured, error) {
	objs, err := readiness.DecodeManifest(manifest, ns, c.RESTMapper())
	if err != nil {
		return nil, err
	}
	for _, u := range objs {
		normalizeSecret(u)
	}
	return objs, nil
}

// normalizeSecret moves a Secret's stringData into data, base64-encoded, as
// the API server stores it: the live Secret has no stringData, so comparing
// it with the manifest as written would find drift every time.
func normalizeSecret(u *unstructured.Unstructured) {
	if u.GetAPIVersion() != "v1" || u.GetKind() != "Secret" {
		return
	}
	sd, ok, _ := unstructured.NestedStringMap(u.Object, "stringData")
	if !ok {
		return
	}
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	_ = unstructured.SetNestedMap(u.Object, data, "data")
	unstructured.RemoveNestedField(u.Object, "stringData")
}

// driftPatch returns the patch that makes live hold every field want sets
// again, or nil when live still holds them all: the object did not drift.
// Fields want does not set (defaults, status, what other controllers add)
// are left alone. Kinds client-go knows get a strategic merge patch, so lists
// with merge keys (containers, ports) are compared element by element; other
// kinds (custom resources) a JSON merge patch.
//
// A field the manifest writes as null (a chart's `annotations:` or `env:`
// with nothing under it) is a field it does not set: the API server drops it
// on create, so the live object lacks it or holds what others added there
// (Helm's meta.helm.sh annotations, the Deployment controller's revision).
// Kept in want, it made a patch that set it to null, deleting what others
// added, after every restart (issue 39, found on sealed-secrets' Roles,
// RoleBindings and Deployment: a DriftCorrected event no one caused, and
// Helm's ownership annotations gone).
func driftPatch(want, live *unstructured.Unstructured) (client.Patch, error) {
	wantJSON, err := json.Marshal(withoutNulls(want.Object))
	if err != nil {
		return nil, err
	}
	liveJSON, err := json.Marshal(live.Object)
	if err != nil {
		return nil, err
	}
	var patch []byte
	pt := types.MergePatchType
	if typed, err := scheme.Scheme.New(want.GroupVersionKind()); err == nil {
		meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
		if err != nil {
			return nil, err
		}
		// original = modified = want: nothing is deleted, only what want
		// sets and live lacks or changed is patched back.
		patch, err = strategicpatch.CreateThreeWayMergePatch(wantJSON, wantJSON, liveJSON, meta, true)
		if err != nil {
			return nil, err
		}
		if patch, err = withoutOrderDirectives(patch); err != nil {
			return nil, err
		}
		pt = types.StrategicMergePatchType
	} else if patch, err = jsonmergepatch.CreateThreeWayJSONMergePatch(wantJSON, wantJSON, liveJSON); err != nil {
		return nil, err
	}
	if len(patch) == 0 || string(patch) == "{}" || string(patch) == "null" {
		return nil, nil
	}
	return client.RawPatch(pt, patch), nil
}

// withoutNulls returns v with the null fields of its maps dropped, at any
// depth (lists' elements included); v is not changed.
func withoutNulls(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, e := range v {
		if e == nil {
			continue
		}
		out[k] = withoutNullsIn(e)
	}
	return out
}

func withoutNullsIn(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return withoutNulls(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutNullsIn(e)
		}
		return out
	}
	return v
}

// withoutOrderDirectives drops the $setElementOrder directives of a strategic
// merge patch: the order of a list's elements is not a field the manifest
// sets (a container injected by a webhook comes after the chart's), and a
// patch made only of them changes nothing that drifted.
func withoutOrderDirectives(patch []byte) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	var strip func(v any) any
	strip = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.HasPrefix(k, "$setElementOrder/") {
					delete(v, k)
					continue
				}
				e = strip(e)
				if em, ok := e.(map[string]any); ok && len(em) == 0 {
					delete(v, k)
				} else {
					v[k] = e
				}
			}
		case []any:
			for i := range v {
				v[i] = strip(v[i])
			}
		}
		return v
	}
	strip(m)
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}
