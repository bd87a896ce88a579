package release

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
)

func withValuesFrom(spec map[string]any, refs ...map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	if len(refs) > 0 {
		items := make([]any, len(refs))
		for i, r := range refs {
			items[i] = r
		}
		u.Object["valuesFrom"] = items
	}
	return u
}

// The precedence: spec (which holds the chart's defaults the CRD wrote),
// then valuesFrom in order, then the watch's overrideValues.
func TestMergeValuesPrecedence(t *testing.T) {
	obj := withValuesFrom(map[string]any{"page": map[string]any{"title": "from spec", "body": "from spec"}, "replicaCount": int64(2),
		"service": map[string]any{"port": int64(80), "type": "ClusterIP"}})
	srcs := []ValuesSource{
		{Ref: ValuesReference{Kind: "ConfigMap", Name: "base", ValuesKey: "values.yaml"}, Found: true,
			Content: "page:\n  title: from base\n  body: from base\nservice:\n  port: 81\n"},
		{Ref: ValuesReference{Kind: "Secret", Name: "db", ValuesKey: "values.yaml"}, Found: true,
			Content: "page:\n  body: from secret\nservice:\n  port: 82\n"},
		{Ref: ValuesReference{Kind: "Secret", Name: "pw", ValuesKey: "password", TargetPath: "auth.password"}, Found: true,
			Content: "s3cr,et\\x"},
		{Ref: ValuesReference{Kind: "Secret", Name: "gone", ValuesKey: "values.yaml", Optional: true}},
	}
	got, err := MergeValues(obj, srcs, map[string]string{"service.port": "83"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"page":         map[string]any{"title": "from base", "body": "from secret"},
		"replicaCount": int64(2),
		"service":      map[string]any{"port": int64(83), "type": "ClusterIP"},
		"auth":         map[string]any{"password": "s3cr,et\\x"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged values:\n got %#v\nwant %#v", got, want)
	}
	// The spec is not changed by the merge.
	if port, _, _ := unstructured.NestedInt64(obj.Object, "spec", "service", "port"); port != 80 {
		t.Error("MergeValues wrote into the resource's spec")
	}
}

// Without sources the values are Values' (the digest of every existing
// release stays the same).
func TestMergeValuesWithoutSourcesIsValues(t *testing.T) {
	obj := withValuesFrom(map[string]any{"a": "b"})
	a, _ := MergeValues(obj, nil, map[string]string{"x": "1"})
	b, _ := Values(obj, map[string]string{"x": "1"})
	if ValuesDigest(a) != ValuesDigest(b) {
		t.Errorf("digests differ: %s %s", ValuesDigest(a), ValuesDigest(b))
	}
}

// A key that is not YAML is ValuesSourceInvalid naming the key and the
// line, never the content.
func TestMergeValuesInvalidYAMLNamesKeyAndLine(t *testing.T) {
	content := "page:\n  title: ok\n  body: [hunter2-secret\n"
	srcs := []ValuesSource{{Ref: ValuesReference{Kind: "Secret", Name: "db", ValuesKey: "values.yaml"}, Found: true, Content: content}}
	_, err := MergeValues(withValuesFrom(nil), srcs, nil)
	var e *Error
	if !errors.As(err, &e) || e.Reason != status.ReasonValuesSourceInvalid {
		t.Fatalf("err = %v, want reason %s", err, status.ReasonValuesSourceInvalid)
	}
	msg := AsFailure(err).Message
	for _, want := range []string{"Secret db", "key values.yaml", "line "} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("message %q quotes the content", msg)
	}
}

// The watch's references come first; keys default to values.yaml; a
// malformed entry is an error.
func TestValuesReferences(t *testing.T) {
	obj := withValuesFrom(nil, map[string]any{"kind": "Secret", "name": "own"},
		map[string]any{"kind": "ConfigMap", "name": "cm", "valuesKey": "k", "optional": true})
	refs, err := ValuesReferences(obj, []ValuesReference{{Kind: "ConfigMap", Name: "team", ValuesKey: "values.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []ValuesReference{{Kind: "ConfigMap", Name: "team", ValuesKey: "values.yaml"},
		{Kind: "Secret", Name: "own", ValuesKey: "values.yaml"}, {Kind: "ConfigMap", Name: "cm", ValuesKey: "k", Optional: true}}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("refs = %+v, want %+v", refs, want)
	}
	if refs, err := ValuesReferences(withValuesFrom(nil), nil); refs != nil || err != nil {
		t.Errorf("no valuesFrom: %v, %v", refs, err)
	}
	if _, err := ValuesReferences(withValuesFrom(nil, map[string]any{"kind": "Pod", "name": "x"}), nil); err == nil {
		t.Error("a Pod reference was accepted")
	}
}

// Only what came from Secrets is given to the redactor.
func TestSecretValues(t *testing.T) {
	srcs := []ValuesSource{
		{Ref: ValuesReference{Kind: "Secret", Name: "a"}, Found: true, Content: "x:\n  y: topsecret\n"},
		{Ref: ValuesReference{Kind: "ConfigMap", Name: "b"}, Found: true, Content: "z: public"},
	}
	got := SecretValues(srcs)
	s := strings.ReplaceAll(strings.TrimSpace(strings.Join(flatten(got), ",")), "\n", " ")
	if !strings.Contains(s, "topsecret") || strings.Contains(s, "public") {
		t.Errorf("SecretValues = %v", got)
	}
}

func flatten(v any) []string {
	switch t := v.(type) {
	case map[string]any:
		var out []string
		for _, x := range t {
			out = append(out, flatten(x)...)
		}
		return out
	case string:
		return []string{t}
	}
	return nil
}

// literal (Flux's, helm --set-literal) sets a targetPath's content as a
// string, verbatim: what --set would type (a number, true, null) stays
// the text, and --set's syntax in it is text too. Without literal the same
// content is typed; without targetPath literal changes nothing.
func TestMergeValuesLiteral(t *testing.T) {
	ref := func(key, path string, literal bool) ValuesReference {
		return ValuesReference{Kind: "ConfigMap", Name: "c", ValuesKey: key, TargetPath: path, Literal: literal}
	}
	odd := "a,b=[c]{d}\\e\nf: g"
	srcs := []ValuesSource{
		{Ref: ref("port", "lit.port", true), Found: true, Content: "0123"},
		{Ref: ref("flag", "lit.flag", true), Found: true, Content: "true"},
		{Ref: ref("none", "lit.none", true), Found: true, Content: "null"},
		{Ref: ref("odd", "lit.odd", true), Found: true, Content: odd},
		{Ref: ref("flag", "typed.flag", false), Found: true, Content: "true"},
		{Ref: ref("values.yaml", "", true), Found: true, Content: "merged: 3\n"},
	}
	got, err := MergeValues(withValuesFrom(map[string]any{}), srcs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"lit":    map[string]any{"port": "0123", "flag": "true", "none": "null", "odd": odd},
		"typed":  map[string]any{"flag": true},
		"merged": float64(3),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged values:\n got %#v\nwant %#v", got, want)
	}
}
