package release

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
)

var (
	helmTime  = metav1.NewTime(time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC))
	laterTime = metav1.NewTime(time.Date(2026, 12, 6, 14, 1, 2, 0, time.UTC))
)

func entry(manager, op, sub string, at metav1.Time, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: sub,
		Time: &at, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// explained runs the comparison of a re-apply (Runner.restoration) of live
// against want under policy.
func explained(t *testing.T, policy DriftPolicy, want, live *unstructured.Unstructured) *restoration {
	t.Helper()
	r := &Runner{Shared: &Shared{Services: &Services{}, Drift: policy}, Name: "web", Namespace: "ns"}
	w, err := r.restoration(want, live)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func fieldsOf(w *restoration) []status.DriftedField {
	if w == nil {
		return nil
	}
	return w.found.Fields
}

func TestDriftFieldsAndTheirWriters(t *testing.T) {
	scaledLive := func() *unstructured.Unstructured {
		live := decode(t, liveDeployment)
		_ = unstructured.SetNestedField(live.Object, int64(5), "spec", "replicas")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("helm", "Update", "", helmTime, `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:selector":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
			entry("kubectl", "Update", "scale", laterTime, `{"f:spec":{"f:replicas":{}}}`),
		})
		return live
	}
	t.Run("kubectl scale: /spec/replicas by kubectl through scale", func(t *testing.T) {
		got := fieldsOf(explained(t, DriftPolicy{}, decode(t, wantDeployment), scaledLive()))
		want := []status.DriftedField{{Path: "/spec/replicas", Manager: "kubectl", Operation: "Update", Subresource: "scale", Time: &laterTime}}
		if !equalFields(got, want) {
			t.Errorf("fields %+v, want %+v", got, want)
		}
	})
	t.Run("a container's field, by its index in the live list", func(t *testing.T) {
		live := decode(t, liveDeployment)
		cs, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
		// The sidecar first: the index is the live list's, not the manifest's.
		cs[0], cs[1] = cs[1], cs[0]
		cs[1].(map[string]any)["image"] = "nginx:evil"
		_ = unstructured.SetNestedSlice(live.Object, cs, "spec", "template", "spec", "containers")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("helm", "Update", "", helmTime, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
			entry("mallory", "Update", "", laterTime, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{"f:image":{}},"k:{\"name\":\"sidecar\"}":{".":{},"f:image":{}}}}}}}`),
		})
		got := fieldsOf(explained(t, DriftPolicy{}, decode(t, wantDeployment), live))
		want := []status.DriftedField{{Path: "/spec/template/spec/containers/1/image", Manager: "mallory", Operation: "Update", Time: &laterTime}}
		if !equalFields(got, want) {
			t.Errorf("fields %+v, want %+v", got, want)
		}
	})
	t.Run("a port, keyed by more fields in managedFields than by its merge key", func(t *testing.T) {
		live := decode(t, liveDeployment)
		cs, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]any)["ports"] = []any{map[string]any{"name": "web", "containerPort": int64(80), "protocol": "TCP"}}
		_ = unstructured.SetNestedSlice(live.Object, cs, "spec", "template", "spec", "containers")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("bob", "Apply", "", laterTime, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{}}}}}}}}}`),
		})
		got := fieldsOf(explained(t, DriftPolicy{}, decode(t, wantDeployment), live))
		want := []status.DriftedField{{Path: "/spec/template/spec/containers/0/ports/0/name", Manager: "bob", Operation: "Apply", Time: &laterTime}}
		if !equalFields(got, want) {
			t.Errorf("fields %+v, want %+v", got, want)
		}
	})
	t.Run("a removed label has no writer; a key with a slash is escaped", func(t *testing.T) {
		want := decode(t, wantDeployment)
		want.SetAnnotations(map[string]string{"example.com/owner": "team-a"})
		live := decode(t, liveDeployment)
		live.SetLabels(map[string]string{"extra": "x"})
		live.SetAnnotations(map[string]string{"example.com/owner": "team-b"})
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("eve", "Update", "", laterTime, `{"f:metadata":{"f:annotations":{"f:example.com/owner":{}}}}`),
		})
		got := fieldsOf(explained(t, DriftPolicy{}, want, live))
		exp := []status.DriftedField{
			{Path: "/metadata/annotations/example.com~1owner", Manager: "eve", Operation: "Update", Time: &laterTime},
			{Path: "/metadata/labels/app"},
		}
		if !equalFields(got, exp) {
			t.Errorf("fields %+v, want %+v", got, exp)
		}
	})
	t.Run("a ConfigMap's data key", func(t *testing.T) {
		want := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\ndata: {greeting: hello, other: same}\n")
		live := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\ndata: {greeting: tampered, other: same}\n")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("helm", "Update", "", helmTime, `{"f:data":{".":{},"f:other":{}}}`),
			entry("alice", "Update", "", laterTime, `{"f:data":{"f:greeting":{}}}`),
		})
		got := fieldsOf(explained(t, DriftPolicy{}, want, live))
		exp := []status.DriftedField{{Path: "/data/greeting", Manager: "alice", Operation: "Update", Time: &laterTime}}
		if !equalFields(got, exp) {
			t.Errorf("fields %+v, want %+v", got, exp)
		}
	})
	t.Run("a Secret's data key shows only its path", func(t *testing.T) {
		want := decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: web, namespace: ns}\ndata: {password: c2VjcmV0LW9uZQ==}\n")
		live := decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: web, namespace: ns}\ndata: {password: c2VjcmV0LXR3bw==}\n")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{entry("alice", "Update", "", laterTime, `{"f:data":{"f:password":{}}}`)})
		w := explained(t, DriftPolicy{}, want, live)
		exp := []status.DriftedField{{Path: "/data/password", Manager: "alice", Operation: "Update", Time: &laterTime}}
		if !equalFields(fieldsOf(w), exp) {
			t.Errorf("fields %+v, want %+v", fieldsOf(w), exp)
		}
		b, _ := json.Marshal(w.found)
		msg := w.found.Describe()
		for _, secret := range []string{"c2VjcmV0", "secret-one", "secret-two"} {
			if strings.Contains(string(b), secret) || strings.Contains(msg, secret) {
				t.Errorf("the Secret's value shows in %s / %q", b, msg)
			}
		}
	})
}

func TestDriftIgnoreRules(t *testing.T) {
	live := func() *unstructured.Unstructured {
		l := decode(t, liveDeployment)
		_ = unstructured.SetNestedField(l.Object, int64(5), "spec", "replicas")
		cs, _, _ := unstructured.NestedSlice(l.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]any)["image"] = "nginx:evil"
		_ = unstructured.SetNestedSlice(l.Object, cs, "spec", "template", "spec", "containers")
		l.SetManagedFields([]metav1.ManagedFieldsEntry{
			entry("kubectl", "Update", "scale", laterTime, `{"f:spec":{"f:replicas":{}}}`),
			entry("mallory", "Update", "", laterTime, `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{"f:image":{}}}}}}}`),
		})
		return l
	}
	hpa := DriftIgnore{Paths: []string{"/spec/replicas"}, Manager: "kubectl"}
	tests := []struct {
		name   string
		policy DriftPolicy
		paths  []string // left to restore
		patch  string   // a part of the patch left
		absent string   // not in the patch left
	}{
		{"no rule", DriftPolicy{}, []string{"/spec/replicas", "/spec/template/spec/containers/0/image"}, `"replicas":2`, ""},
		{"path and manager", DriftPolicy{Ignore: []DriftIgnore{hpa}}, []string{"/spec/template/spec/containers/0/image"}, `"image":"nginx:1.27"`, "replicas"},
		{"path of another manager", DriftPolicy{Ignore: []DriftIgnore{{Paths: []string{"/spec/replicas"}, Manager: "kube-controller-manager"}}},
			[]string{"/spec/replicas", "/spec/template/spec/containers/0/image"}, `"replicas":2`, ""},
		{"manager and subresource", DriftPolicy{Ignore: []DriftIgnore{{Manager: "kubectl", Subresource: "scale"}}},
			[]string{"/spec/template/spec/containers/0/image"}, `"image"`, "replicas"},
		{"a parent path", DriftPolicy{Ignore: []DriftIgnore{{Paths: []string{"/spec/template/"}}}}, []string{"/spec/replicas"}, `"replicas":2`, "containers"},
		{"a target of another kind", DriftPolicy{Ignore: []DriftIgnore{{Manager: "mallory", Target: DriftTarget{Kind: "StatefulSet"}}}},
			[]string{"/spec/replicas", "/spec/template/spec/containers/0/image"}, `"image"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := explained(t, tt.policy, decode(t, wantDeployment), live())
			var got []string
			for _, f := range fieldsOf(w) {
				got = append(got, f.Path)
			}
			if strings.Join(got, " ") != strings.Join(tt.paths, " ") {
				t.Errorf("paths %v, want %v", got, tt.paths)
			}
			data, _ := w.patch.Data(nil)
			if !strings.Contains(string(data), tt.patch) || (tt.absent != "" && strings.Contains(string(data), tt.absent)) {
				t.Errorf("patch %s: want %s in it and not %q", data, tt.patch, tt.absent)
			}
		})
	}
	t.Run("everything ignored: no drift", func(t *testing.T) {
		p := DriftPolicy{Ignore: []DriftIgnore{hpa, {Manager: "mallory"}}}
		if w := explained(t, p, decode(t, wantDeployment), live()); w != nil {
			data, _ := w.patch.Data(nil)
			t.Errorf("a restoration is left: %s", data)
		}
	})
}

func equalFields(a, b []status.DriftedField) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The memo hands out copies (a restoring write decodes the server's answer
// into its object), remembers "no drift" too, and starts afresh when full.
func TestDriftMemo(t *testing.T) {
	m := NewDriftMemo()
	k := driftKey{uid: "u1", version: "7", release: "ns/web", revision: 1}
	w := &restoration{verb: "patch", obj: decode(t, liveDeployment), name: "Deployment web"}
	m.put(k, w)
	got, ok := m.get(k)
	if !ok || got == nil || got.name != w.name {
		t.Fatalf("get = %v, %v", got, ok)
	}
	got.obj.SetResourceVersion("8")
	if again, _ := m.get(k); again.obj.GetResourceVersion() != "7" {
		t.Error("a use changed the remembered object")
	}
	none := driftKey{uid: "u2", version: "1"}
	m.put(none, nil)
	if got, ok := m.get(none); !ok || got != nil {
		t.Errorf("no drift not remembered: %v %v", got, ok)
	}
	if _, ok := m.get(driftKey{uid: "u1", version: "8", release: "ns/web", revision: 1}); ok {
		t.Error("another version of the object was taken for the one remembered")
	}
	for i := 0; i < maxDriftMemo; i++ {
		m.put(driftKey{uid: "x", version: strconv.Itoa(i)}, nil)
	}
	if len(m.m) > maxDriftMemo {
		t.Errorf("the memo holds %d entries, more than %d", len(m.m), maxDriftMemo)
	}
}
