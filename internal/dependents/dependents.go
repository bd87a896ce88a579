// Package dependents watches the objects of the operator's releases, so that a
// change to one (its readiness, a deletion by hand) reconciles the resource
// that owns it within seconds.
//
// The watches are scoped: every object the operator deploys carries the label
// ManagedLabel (added by a Helm post-renderer), and one shared cache lists and
// watches only labelled objects, as metadata. No cluster-wide cache of every
// object of a kind is ever built, and no object is polled.
package dependents

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ManagedLabel marks every object of a release deployed by this operator.
const (
	ManagedLabel      = "helmapp.io/managed-by"
	ManagedLabelValue = "helm-app-operator"
)

// Selector selects the objects ManagedLabel marks.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{ManagedLabel: ManagedLabelValue})
}

// Labeler is a Helm post-renderer that adds ManagedLabel to every object of a
// rendered manifest (not to pod templates: it changes no selector). It
// implements Helm's postrender.PostRenderer without importing Helm
// (internal/operator, which hands it to Helm, asserts it does).
//
// Labels are added too: the resource's values of the operator's shard label
// keys, so that only the shard that owns the resource caches its objects.
type Labeler struct {
	Labels map[string]string
}

// Run labels each object of manifests.
func (lb Labeler) Run(manifests *bytes.Buffer) (*bytes.Buffer, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(manifests, 4096)
	out := &bytes.Buffer{}
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("labelling the rendered manifest: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if strings.HasSuffix(u.GetKind(), "List") {
			if err := u.EachListItem(func(o runtime.Object) error { return lb.label(o.(*unstructured.Unstructured)) }); err != nil {
				return nil, err
			}
		} else if err := lb.label(u); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out, nil
}

// Label adds ManagedLabel and lb.Labels to u's labels (not to its pod
// templates), as Run does to each object of a manifest.
func (lb Labeler) Label(u *unstructured.Unstructured) {
	_ = lb.label(u)
}

func (lb Labeler) label(u *unstructured.Unstructured) error {
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range lb.Labels {
		l[k] = v
	}
	l[ManagedLabel] = ManagedLabelValue
	u.SetLabels(l)
	return nil
}
