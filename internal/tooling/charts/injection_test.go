package charts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// injectedKey is the key the key-injection payloads try to add to a map; no
// rendered object may hold it anywhere.
const injectedKey = "injectedKey"

// injectedDoc is a whole object in another namespace, which a value holding
// it must never become.
const injectedDoc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: injected\n  namespace: kube-system\n"

// payloads are the values set, one at a time, in every string field of a
// chart's schema: a document after a separator in several shapes (after each
// kind of line break YAML knows), and a key after a line break at every
// indentation a template of ours uses. Each starts with a harmless prefix,
// one for each kind of pattern a schema of ours sets (a name, a path, a
// percentage), so that a pattern anchored only at the start lets it through.
var payloads = func() []payload {
	var ps []payload
	for _, prefix := range []string{"x", "/", "1%"} {
		add := func(name, value string) {
			ps = append(ps, payload{fmt.Sprintf("%s (after %q)", name, prefix), prefix + value})
		}
		add("a document", "\n---\n"+injectedDoc)
		add("a document, then a separator", "\n---\n"+injectedDoc+"---\n")
		add("an indented document", "\n---\n"+indent(injectedDoc, "    "))
		add("a flow document", "\n--- {apiVersion: v1, kind: ConfigMap, metadata: {name: injected, namespace: kube-system}}\n---\nx: y")
		add("a closing double quote, then a document", "\"\n---\n"+injectedDoc+"---\nx: \"")
		add("a closing single quote, then a document", "'\n---\n"+injectedDoc+"---\nx: '")
		for _, br := range []struct{ name, s string }{{"carriage returns", "\r"}, {"CRLFs", "\r\n"}, {"NELs", "\u0085"}, {"line separators", "\u2028"}} {
			add("a document after "+br.name, strings.ReplaceAll("\n---\n"+injectedDoc, "\n", br.s))
		}
		for n := 0; n <= 12; n += 2 {
			ind := strings.Repeat(" ", n)
			add(fmt.Sprintf("a key at column %d", n), "\n"+ind+injectedKey+": y")
			add(fmt.Sprintf("a namespace at column %d", n), "\n"+ind+"namespace: kube-system\n"+ind+injectedKey+": y")
			add(fmt.Sprintf("a document, then a key at column %d", n), "\n---\n"+injectedDoc+ind+injectedKey+": y\n")
		}
	}
	// A document alone, and as a map key's whole text.
	ps = append(ps, payload{"a separator first", "\n---\n" + injectedDoc + "---\n"})
	return ps
}()

// payload is a value that tries to break out of its place in a template.
type payload struct{ name, value string }

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

// TestNoValueInjectsAnObject renders each chart of helm-charts/ that has a
// values.schema.json with every boolean of its schema on (so that every
// optional template renders), then with each payload in each string field of
// the schema (nested objects, map values and keys, array items, free-form
// objects), and asserts that the chart renders exactly the objects it
// renders without the payload: same kinds, names and namespaces, no key
// the payload carried. Each value is rendered twice: without the schema
// check, which shows that the templates quote the value on their own; and
// with it, where the schema either refuses the value or it renders no more
// than the baseline. The operator must also hold the line for charts that
// do not quote (its post-renderer's scope); this test holds ours to it.
func TestNoValueInjectsAnObject(t *testing.T) {
	dirs, err := filepath.Glob("../../../helm-charts/*")
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var schema map[string]any
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		name := filepath.Base(dir)
		tested++
		t.Run(name, func(t *testing.T) {
			w := schemaWalker{root: schema}
			base := w.booleansOn(schema)
			baseRender, err := renderFresh(dir, base, false)
			if err != nil {
				t.Fatalf("chart %s with every boolean on: %v", name, err)
			}
			if objs, err := objectsOf(baseRender, ""); err != nil || len(objs) == 0 {
				t.Fatalf("chart %s with every boolean on: objects %v, %v", name, objs, err)
			}
			fields := w.stringFields(schema, "", func(v any) map[string]any { return v.(map[string]any) })
			if len(fields) == 0 {
				t.Fatalf("chart %s: no string field in its schema", name)
			}
			for _, f := range fields {
				used := false
				// A value that becomes a name is expected verbatim as that
				// name: the objects to find are those of a plain value.
				plain, err := renderFresh(dir, merge(base, f.values(plainValue)), true)
				if err != nil {
					t.Fatalf("chart %s, field %s = %q: %v", name, f.name, plainValue, err)
				}
				want, err := objectsOf(plain, plainValue)
				if err != nil {
					t.Fatalf("chart %s, field %s = %q: %v", name, f.name, plainValue, err)
				}
				for _, skipSchema := range []bool{true, false} {
					mode := "schema on"
					if skipSchema {
						mode = "schema skipped"
					}
					var broke []string
					for _, p := range payloads {
						r, err := renderFresh(dir, merge(base, f.values(p.value)), skipSchema)
						if err != nil {
							if !skipSchema && strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
								continue // refused by the schema: nothing rendered
							}
							broke = append(broke, fmt.Sprintf("%s: the chart does not render: %s", p.name, firstLine(err.Error())))
							continue
						}
						if !reflect.DeepEqual(r.Manifests, baseRender.Manifests) {
							used = true
						}
						got, err := objectsOf(r, p.value)
						if err != nil {
							broke = append(broke, fmt.Sprintf("%s: %v", p.name, err))
						} else if extra, missing := difference(got, want), difference(want, got); len(extra)+len(missing) > 0 {
							broke = append(broke, fmt.Sprintf("%s: extra objects %v, missing %v", p.name, extra, missing))
						}
					}
					if len(broke) > 0 {
						t.Errorf("chart %s, field %s (%s): %d of %d payloads break out of the value (it is not quoted), first %s",
							name, f.name, mode, len(broke), len(payloads), broke[0])
						for _, b := range broke[1:] {
							t.Logf("chart %s, field %s (%s): %s", name, f.name, mode, b)
						}
					}
				}
				if !used {
					t.Errorf("chart %s, field %s: no payload changed what the chart renders; the test proves nothing for this field (is a flag off?)", name, f.name)
				}
			}
			t.Logf("chart %s: %d string fields, %d payloads each, rendered with and without the schema check", name, len(fields), len(payloads))
		})
	}
	if tested < 2 {
		t.Fatalf("only %d charts with a values.schema.json in helm-charts/", tested)
	}
}

// renderFresh loads the chart anew (a render must not see another's state)
// and renders it for the release of the other chart tests.
func renderFresh(dir string, values map[string]any, skipSchema bool) (*Rendered, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	return renderChart(ch, release, namespace, values, skipSchema)
}

// plainValue is a value that breaks nothing, set to find the objects a
// chart renders with a value in a given field.
const plainValue = "plain"

// objectsOf decodes every document of every manifest as the Kubernetes
// clients Helm applies with do, and returns `Kind namespace/"name"` of each,
// sorted, with a name equal to value written <the value>; it fails on an
// object holding injectedKey anywhere.
func objectsOf(r *Rendered, value string) ([]string, error) {
	var out []string
	for _, m := range r.Manifests {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(m), 4096)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("decode %q: %w", m, err)
			}
			if obj == nil {
				continue
			}
			if path := findKey(obj, injectedKey, ""); path != "" {
				return nil, fmt.Errorf("%s: the payload's key %s is in the object, at %s", describe(obj, ""), injectedKey, path)
			}
			out = append(out, describe(obj, value))
		}
	}
	sort.Strings(out)
	return out, nil
}

func describe(obj map[string]any, value string) string {
	md, _ := obj["metadata"].(map[string]any)
	name := fmt.Sprintf("%q", md["name"])
	if md["name"] == value && value != "" {
		name = "<the value>"
	}
	return fmt.Sprintf("%v %v/%s", obj["kind"], md["namespace"], name)
}

// difference is what a has that b has not, counting repeats.
func difference(a, b []string) []string {
	left := map[string]int{}
	for _, s := range b {
		left[s]++
	}
	var out []string
	for _, s := range a {
		if left[s] > 0 {
			left[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}

// findKey returns the path of the first map key equal to key in v, or "".
func findKey(v any, key, path string) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == key {
				return path + "." + k
			}
			if p := findKey(v[k], key, path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := findKey(e, key, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// stringField is a place in a chart's values where a string goes.
type stringField struct {
	name string
	// values returns the chart's values with s at this place.
	values func(s string) map[string]any
}

// schemaWalker walks a values.schema.json (draft-07, local $refs).
type schemaWalker struct{ root map[string]any }

// resolve follows a local $ref ("#/definitions/x", "#/$defs/x").
func (w schemaWalker) resolve(node map[string]any) map[string]any {
	for i := 0; i < 32; i++ {
		ref, ok := node["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#/") {
			return node
		}
		var cur any = w.root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, _ := cur.(map[string]any)
			cur = m[part]
		}
		next, ok := cur.(map[string]any)
		if !ok {
			return node
		}
		node = next
	}
	return node
}

func types(node map[string]any) map[string]bool {
	out := map[string]bool{}
	switch t := node["type"].(type) {
	case string:
		out[t] = true
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

// booleansOn returns values with every boolean property of node true.
func (w schemaWalker) booleansOn(node map[string]any) map[string]any {
	out := map[string]any{}
	props, _ := w.resolve(node)["properties"].(map[string]any)
	for k, p := range props {
		sub := w.resolve(p.(map[string]any))
		switch ts := types(sub); {
		case ts["boolean"]:
			out[k] = true
		case ts["object"]:
			if m := w.booleansOn(sub); len(m) > 0 {
				out[k] = m
			}
		}
	}
	return out
}

// stringFields lists every place under node (at name) where a string goes;
// wrap puts a value of node's place into the chart's values.
func (w schemaWalker) stringFields(node map[string]any, name string, wrap func(any) map[string]any) []stringField {
	node = w.resolve(node)
	ts := types(node)
	var out []stringField
	if ts["string"] {
		out = append(out, stringField{name: name, values: func(s string) map[string]any { return wrap(s) }})
	}
	if ts["object"] {
		props, _ := node["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, w.stringFields(props[k].(map[string]any), join(name, k), func(v any) map[string]any {
				return wrap(map[string]any{k: v})
			})...)
		}
		switch ap := node["additionalProperties"].(type) {
		case map[string]any:
			// A map: its values, and its keys.
			out = append(out, w.stringFields(ap, join(name, "<value>"), func(v any) map[string]any {
				return wrap(map[string]any{"example.com/key": v})
			})...)
			var sample any = "v"
			if ats := types(w.resolve(ap)); !ats["string"] {
				sample = map[string]any{}
			}
			out = append(out, stringField{name: join(name, "<key>"), values: func(s string) map[string]any {
				return wrap(map[string]any{s: sample})
			}})
		case nil:
			if len(props) == 0 {
				// A free-form object: a string in it, and a key.
				out = append(out,
					stringField{name: join(name, "<any value>"), values: func(s string) map[string]any {
						return wrap(map[string]any{"injectedField": s})
					}},
					stringField{name: join(name, "<any key>"), values: func(s string) map[string]any {
						return wrap(map[string]any{s: "v"})
					}})
			}
		}
	}
	if ts["array"] {
		if items, ok := node["items"].(map[string]any); ok {
			out = append(out, w.stringFields(items, name+"[0]", func(v any) map[string]any {
				return wrap([]any{v})
			})...)
		}
	}
	return out
}

func join(name, k string) string {
	if name == "" {
		return k
	}
	return name + "." + k
}

// merge returns a copy of base with over merged in, maps recursively.
func merge(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = merge(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// TestNamesAreConstrained checks the patterns of values.schema.json: a value
// that becomes a Kubernetes name must be one (DNS-1123), an Ingress path is
// "/" and no whitespace, and no such value lets a line break through; plain
// names, dotted names and the defaults pass.
func TestNamesAreConstrained(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)
	tests := []struct {
		name   string
		values map[string]any
		want   string // the schema error's path; "" for accepted
	}{
		{"ingress class", map[string]any{"ingress": map[string]any{"enabled": true, "className": "nginx.example.com"}}, ""},
		{"ingress class, line break", map[string]any{"ingress": map[string]any{"className": "nginx\nx: y"}}, "/ingress/className"},
		{"ingress class, upper case", map[string]any{"ingress": map[string]any{"className": "Nginx"}}, "/ingress/className"},
		{"ingress class, too long", map[string]any{"ingress": map[string]any{"className": strings.Repeat(long+".", 2)}}, "/ingress/className"},
		{"ingress host, wildcard", map[string]any{"ingress": map[string]any{"enabled": true, "host": "*.example.com"}}, ""},
		{"ingress host, empty", map[string]any{"ingress": map[string]any{"enabled": true, "host": ""}}, ""},
		{"ingress host, line break", map[string]any{"ingress": map[string]any{"host": "example.com\n"}}, "/ingress/host"},
		{"ingress path", map[string]any{"ingress": map[string]any{"enabled": true, "path": "/app/v1.2_x-y"}}, ""},
		{"ingress path, line break", map[string]any{"ingress": map[string]any{"path": "/\n---\n"}}, "/ingress/path"},
		{"ingress path, trailing line break", map[string]any{"ingress": map[string]any{"path": "/app\n"}}, "/ingress/path"},
		{"ingress path, space", map[string]any{"ingress": map[string]any{"path": "/a b"}}, "/ingress/path"},
		{"ingress path, relative", map[string]any{"ingress": map[string]any{"path": "app"}}, "/ingress/path"},
		{"service account", map[string]any{"serviceAccount": map[string]any{"name": long}}, ""},
		{"service account, line break", map[string]any{"serviceAccount": map[string]any{"name": "sa\n"}}, "/serviceAccount/name"},
		{"service account, bad characters", map[string]any{"serviceAccount": map[string]any{"name": "sa_1"}}, "/serviceAccount/name"},
		{"node selector value", map[string]any{"nodeSelector": map[string]any{"kubernetes.io/os": "linux"}}, ""},
		{"node selector value, line break", map[string]any{"nodeSelector": map[string]any{"a": "linux\nb: c"}}, "/nodeSelector/a"},
		{"image tag", map[string]any{"image": map[string]any{"tag": "1.27.3-alpine_x"}}, ""},
		{"image tag, line break", map[string]any{"image": map[string]any{"tag": "1\n"}}, "/image/tag"},
		{"image repository, line break", map[string]any{"image": map[string]any{"repository": "a\nb"}}, "/image/repository"},
		{"image reference, line break", map[string]any{"image": map[string]any{"reference": "a@sha256:0\n"}}, "/image/reference"},
	}
	for _, tt := range tests {
		for _, dir := range []string{nginxDir, echoDir} {
			if dir == echoDir && !strings.HasPrefix(tt.name, "image") {
				continue
			}
			t.Run(filepath.Base(dir)+"/"+tt.name, func(t *testing.T) {
				_, err := Render(dir, release, namespace, tt.values)
				switch {
				case tt.want == "" && err != nil:
					t.Errorf("refused %v: %v", tt.values, err)
				case tt.want != "" && err == nil:
					t.Errorf("accepted %q", fmt.Sprint(tt.values))
				case tt.want != "" && !strings.Contains(err.Error(), tt.want):
					t.Errorf("error %q does not name %s", err, tt.want)
				}
			})
		}
	}
}
