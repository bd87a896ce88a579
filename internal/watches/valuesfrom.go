package watches

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValuesFrom is one entry of a watch's valuesFrom, our extension: a key of
// a Secret or ConfigMap, in each resource's own namespace, merged into the
// values of every resource of the kind before the resource's own valuesFrom
// (the same shape, documented in the README).
type ValuesFrom struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	ValuesKey  string `json:"valuesKey,omitempty"`
	TargetPath string `json:"targetPath,omitempty"`
	Optional   bool   `json:"optional,omitempty"`
	Literal    bool   `json:"literal,omitempty"`
}

// validateValuesFrom names the entry and index of a malformed reference.
func validateValuesFrom(name string, refs []ValuesFrom) error {
	for i, r := range refs {
		switch {
		case r.Kind != "Secret" && r.Kind != "ConfigMap":
			return fmt.Errorf("%s: field valuesFrom[%d].kind must be Secret or ConfigMap, got %q", name, i, r.Kind)
		case len(validation.IsDNS1123Subdomain(r.Name)) > 0:
			return fmt.Errorf("%s: field valuesFrom[%d].name must name a %s, got %q", name, i, r.Kind, r.Name)
		case r.ValuesKey != "" && len(validation.IsConfigMapKey(r.ValuesKey)) > 0:
			return fmt.Errorf("%s: field valuesFrom[%d].valuesKey must be a key of a %s, got %q", name, i, r.Kind, r.ValuesKey)
		}
	}
	return nil
}
