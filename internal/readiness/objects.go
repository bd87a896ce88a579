package readiness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
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

// manifestDoc is the part of a manifest document that identifies an object.
type manifestDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	// Items is decoded only for List kinds: a custom resource may have a
	// top-level field of that name that is no list of objects.
	Items json.RawMessage `json:"items"`
}

// ObjectsFromManifest lists the objects of a Helm release manifest
// (rel.Manifest: YAML documents separated by "---"; hooks are not in it), in
// the manifest's order. Empty and comment-only documents are skipped, and the
// items of a List kind are listed in its place.
//
// A namespaced object without a namespace gets defaultNamespace, the release's
// namespace; a cluster-scoped object gets none, whatever the manifest says.
// Scope comes from mapper: a kind it cannot map (a CRD not installed yet, a nil
// mapper) is taken as namespaced, so one unknown kind does not hide the rest.
//
// It fails on a document that is not YAML or lacks apiVersion, kind or name,
// naming the template it came from.
func ObjectsFromManifest(manifest, defaultNamespace string, mapper meta.RESTMapper) ([]ObjectRef, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var refs []ObjectRef
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return refs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d of the manifest: %w", n, err)
		}
		var doc manifestDoc
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", docName(raw, n), err)
		}
		found, err := docRefs(doc, defaultNamespace, mapper)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", docName(raw, n), err)
		}
		refs = append(refs, found...)
	}
}

// docRefs returns the objects of one document: none for an empty one, its
// items for a List, else the object itself.
func docRefs(doc manifestDoc, defaultNamespace string, mapper meta.RESTMapper) ([]ObjectRef, error) {
	if doc.APIVersion == "" && doc.Kind == "" && doc.Metadata.Name == "" {
		return nil, nil
	}
	if doc.Kind == "" || doc.APIVersion == "" {
		return nil, errors.New("the object has no apiVersion or no kind")
	}
	if strings.HasSuffix(doc.Kind, "List") && len(doc.Items) > 0 && string(doc.Items) != "null" {
		var items []manifestDoc
		if err := json.Unmarshal(doc.Items, &items); err != nil {
			return nil, fmt.Errorf("reading the items of %s: %w", doc.Kind, err)
		}
		var refs []ObjectRef
		for _, item := range items {
			found, err := docRefs(item, defaultNamespace, mapper)
			if err != nil {
				return nil, err
			}
			refs = append(refs, found...)
		}
		return refs, nil
	}
	if doc.Metadata.Name == "" {
		return nil, fmt.Errorf("the %s has no metadata.name", doc.Kind)
	}
	ref := ObjectRef{APIVersion: doc.APIVersion, Kind: doc.Kind, Namespace: doc.Metadata.Namespace, Name: doc.Metadata.Name}
	if namespaced(mapper, ref.GroupVersionKind()) {
		if ref.Namespace == "" {
			ref.Namespace = defaultNamespace
		}
	} else {
		ref.Namespace = ""
	}
	return []ObjectRef{ref}, nil
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
