package readiness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ObjectRef names one object of a release.
type ObjectRef struct {
	APIVersion string
	Kind       string
	// Namespace is empty for cluster-scoped objects.
	Namespace string
	Name      string
}

// GroupVersionKind returns the ref's group, version and kind.
func (r ObjectRef) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
}

// String returns "Kind namespace/name", or "Kind name" for a cluster-scoped object.
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// ObjectsFromManifest names the objects of a Helm release manifest, as
// DecodeManifest decodes them, in the manifest's order.
func ObjectsFromManifest(manifest, defaultNamespace string, mapper meta.RESTMapper) ([]ObjectRef, error) {
	objs, err := DecodeManifest(manifest, defaultNamespace, mapper)
	if err != nil {
		return nil, err
	}
	refs := make([]ObjectRef, 0, len(objs))
	for _, u := range objs {
		refs = append(refs, ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()})
	}
	return refs, nil
}

// DecodeManifest decodes the objects of a Helm release manifest
// (rel.Manifest, or a hook's: YAML documents separated by "---"), in the
// manifest's order; it is the one decoder of manifests, for the readiness
// of a release's objects as for Helm-side work (re-apply, preflight,
// disowning). Empty and comment-only documents, and documents with neither
// apiVersion, kind nor name, are skipped; a List kind (a kind ending in
// "List" with items) is replaced by its items. Any other object is kept
// whole, an "items" field of its own included.
//
// A namespaced object without a namespace gets defaultNamespace, the release's
// namespace; a cluster-scoped object gets none, whatever the manifest says.
// Scope comes from mapper: a kind it cannot map (a CRD not installed yet, a nil
// mapper) is taken as namespaced, so one unknown kind does not hide the rest.
//
// It fails on a document that is not YAML or lacks apiVersion, kind or name,
// naming the template it came from.
func DecodeManifest(manifest, defaultNamespace string, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var out []*unstructured.Unstructured
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d of the manifest: %w", n, err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", docName(raw, n), err)
		}
		found, err := docObjects(doc, defaultNamespace, mapper)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", docName(raw, n), err)
		}
		out = append(out, found...)
	}
}

// docObjects returns the objects of one document: none for an empty one,
// its items for a List, else the object itself.
func docObjects(doc map[string]any, defaultNamespace string, mapper meta.RESTMapper) ([]*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: doc}
	apiVersion, kind := field(doc, "apiVersion"), field(doc, "kind")
	md, _ := doc["metadata"].(map[string]any)
	name := field(md, "name")
	if apiVersion == "" && kind == "" && name == "" {
		return nil, nil
	}
	if kind == "" || apiVersion == "" {
		return nil, errors.New("the object has no apiVersion or no kind")
	}
	if items, ok := doc["items"]; ok && items != nil && strings.HasSuffix(kind, "List") {
		list, ok := items.([]any)
		if !ok {
			return nil, fmt.Errorf("reading the items of %s: not a list", kind)
		}
		var out []*unstructured.Unstructured
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("reading the items of %s: item %d is not an object", kind, i+1)
			}
			found, err := docObjects(m, defaultNamespace, mapper)
			if err != nil {
				return nil, err
			}
			out = append(out, found...)
		}
		return out, nil
	}
	if name == "" {
		return nil, fmt.Errorf("the %s has no metadata.name", kind)
	}
	if namespaced(mapper, u.GroupVersionKind()) {
		if u.GetNamespace() == "" {
			u.SetNamespace(defaultNamespace)
		}
	} else {
		u.SetNamespace("")
	}
	return []*unstructured.Unstructured{u}, nil
}

// field is m's string field key; "" when m is nil, the field is missing or
// not a string.
func field(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// namespaced tells whether objects of gvk live in a namespace; when mapper
// cannot tell, they are taken to.
func namespaced(mapper meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	if mapper == nil {
		return true
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return true
	}
	return m.Scope.Name() != meta.RESTScopeNameRoot
}

// docName names the n-th document for an error, by the template Helm rendered
// it from ("# Source: nginx/templates/deployment.yaml") when it says so.
func docName(raw []byte, n int) string {
	for _, line := range strings.Split(string(raw), "\n") {
		if src, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			return fmt.Sprintf("document %d (%s) of the manifest", n, strings.TrimSpace(src))
		}
	}
	return fmt.Sprintf("document %d of the manifest", n)
}

// Kinds returns the distinct kinds of refs, in order of first appearance.
func Kinds(refs []ObjectRef) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, r := range refs {
		if gvk := r.GroupVersionKind(); !seen[gvk] {
			seen[gvk] = true
			out = append(out, gvk)
		}
	}
	return out
}
