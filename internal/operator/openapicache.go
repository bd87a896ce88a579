package operator

import (
	"encoding/json"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubectl/pkg/validation"
)

// oneColdPerKind is a shared manifest validator (see sharedValidators) that
// lets one manifest of each kind at a time through while the kind is cold.
//
// kubectl's validator asks, per kind, whether the API server validates
// fields itself (the fieldValidation parameter), and remembers the answer.
// Learning it parses the OpenAPI v3 document of the kind's group version,
// the core group's being megabytes of JSON; and the memory is filled only
// when a parse ends, so every worker whose first manifest of the kind comes
// before that parses the document again. With 8 workers starting a burst of
// installs of a chart of ConfigMaps and Secrets, that was 16 parses instead
// of 2, each time the validators are built again (capabilitiesTTL): about a
// quarter of the operator's CPU installing 100 resources (issue 27). Here
// the first manifest of a kind is validated alone, the others of the kind
// wait for it and then find the answer remembered.
//
// The judgement is kubectl's own, unchanged: every manifest goes through
// the inner validator, only later. A manifest whose kind cannot be read
// goes through at once (the inner validator reports it).
type oneColdPerKind struct {
	inner validation.Schema

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*kindGate
}

// kindGate is held while the first manifest of a kind is validated; warm is
// set once one has been.
type kindGate struct {
	mu   sync.Mutex
	warm atomic.Bool
}

func newOneColdPerKind(inner validation.Schema) *oneColdPerKind {
	return &oneColdPerKind{inner: inner, kinds: map[schema.GroupVersionKind]*kindGate{}}
}

// ValidateBytes validates one manifest (JSON, as cli-runtime's builder
// hands it over) with the inner validator.
func (v *oneColdPerKind) ValidateBytes(data []byte) error {
	gvk, ok := manifestKind(data)
	if !ok {
		return v.inner.ValidateBytes(data)
	}
	v.mu.Lock()
	g := v.kinds[gvk]
	if g == nil {
		g = &kindGate{}
		v.kinds[gvk] = g
	}
	v.mu.Unlock()
	if g.warm.Load() {
		return v.inner.ValidateBytes(data)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	err := v.inner.ValidateBytes(data)
	g.warm.Store(true)
	return err
}

// manifestKind reads the apiVersion and kind of a JSON manifest.
func manifestKind(data []byte) (schema.GroupVersionKind, bool) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(data, &tm); err != nil || tm.Kind == "" {
		return schema.GroupVersionKind{}, false
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(tm.Kind), true
}
