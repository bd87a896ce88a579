package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Descriptor prefixes the OpenShift console understands.
const (
	uiPrefix         = "urn:alm:descriptor:com.tectonic.ui:"
	conditionsXDesc  = "urn:alm:descriptor:io.kubernetes.conditions"
	statusTextXDesc  = "urn:alm:descriptor:text"
	selectPrefix     = uiPrefix + "select:"
	dependencyPrefix = uiPrefix + "fieldDependency:"
)

// checkOwnedCRDs checks what the console and the scorecard's olm tests need of
// each owned CRD description, against the CRD's schema and the examples:
//
//   - displayName and description are set, and for a kind the operator
//     serves (served: "group/kind" of watches.yaml) resources (the kinds it
//     creates); a chart's CRD shipped with the operator (make chart
//     CRDS=bundle) is only described: the operator does not serve it;
//   - every top-level field of the kind's alm-examples spec has a
//     specDescriptor with that path (scorecard olm-spec-descriptors);
//   - every descriptor path is a field of the CRD's spec or status schema, and
//     its x-descriptors fit the field's type: podCount and number on integers,
//     booleanSwitch and checkbox on booleans, text and password on strings,
//     resourceRequirements on objects, and on an enum exactly one select:<v>
//     per enum value (or imagePullPolicy);
//   - a served kind has a statusDescriptor for `conditions` with
//     io.kubernetes.conditions.
//
// It returns every problem found, joined.
func checkOwnedCRDs(owned []v1alpha1.CRDDescription, crds map[string]*apiextensionsv1.CustomResourceDefinition, examples []*unstructured.Unstructured, served map[string]bool) error {
	var errs []error
	for _, d := range owned {
		where := fmt.Sprintf("owned CRD %s (%s)", d.Name, d.Kind)
		crd := crds[d.Name]
		if crd == nil {
			errs = append(errs, fmt.Errorf("%s: no such CRD in config/crd", where))
			continue
		}
		if d.DisplayName == "" || d.Description == "" {
			errs = append(errs, fmt.Errorf("%s: displayName and description are required", where))
		}
		ours := served[crd.Spec.Group+"/"+d.Kind]
		if ours && len(d.Resources) == 0 {
			errs = append(errs, fmt.Errorf("%s: resources (the kinds it creates) are required", where))
		}
		var schema *apiextensionsv1.JSONSchemaProps
		for _, v := range crd.Spec.Versions {
			if v.Name == d.Version && v.Schema != nil {
				schema = v.Schema.OpenAPIV3Schema
			}
		}
		if schema == nil {
			errs = append(errs, fmt.Errorf("%s: the CRD has no version %q with a schema", where, d.Version))
			continue
		}
		spec, status := schema.Properties["spec"], schema.Properties["status"]

		paths := map[string]bool{}
		for _, sd := range d.SpecDescriptors {
			paths[sd.Path] = true
			if err := checkDescriptor(&spec, sd.Path, sd.XDescriptors, false); err != nil {
				errs = append(errs, fmt.Errorf("%s: specDescriptor %s: %w", where, sd.Path, err))
			}
		}
		for _, ex := range examples {
			if ex.GetKind() != d.Kind {
				continue
			}
			fields, _, _ := unstructured.NestedMap(ex.Object, "spec")
			for _, f := range slices.Sorted(maps.Keys(fields)) {
				if !paths[f] {
					errs = append(errs, fmt.Errorf("%s: the example %s sets spec.%s, which has no specDescriptor", where, ex.GetName(), f))
				}
			}
		}

		hasConditions := false
		for _, sd := range d.StatusDescriptors {
			if sd.Path == "conditions" && slices.Contains(sd.XDescriptors, conditionsXDesc) {
				hasConditions = true
			}
			if err := checkDescriptor(&status, sd.Path, sd.XDescriptors, true); err != nil {
				errs = append(errs, fmt.Errorf("%s: statusDescriptor %s: %w", where, sd.Path, err))
			}
		}
		if ours && !hasConditions {
			errs = append(errs, fmt.Errorf("%s: a statusDescriptor for conditions with %s is required", where, conditionsXDesc))
		}
	}
	return errors.Join(errs...)
}

// checkDescriptor checks one descriptor's path and x-descriptors against the
// schema of spec or status (root).
func checkDescriptor(root *apiextensionsv1.JSONSchemaProps, path string, xds []string, isStatus bool) error {
	field, err := schemaAt(root, path)
	if err != nil {
		return err
	}
	var selects []string
	for _, x := range xds {
		switch {
		case strings.HasPrefix(x, selectPrefix):
			selects = append(selects, strings.TrimPrefix(x, selectPrefix))
		case strings.HasPrefix(x, dependencyPrefix):
			dep := strings.TrimPrefix(x, dependencyPrefix)
			i := strings.LastIndex(dep, ":")
			if i < 0 {
				return fmt.Errorf("%s: want fieldDependency:<path>:<value>", x)
			}
			if _, err := schemaAt(root, dep[:i]); err != nil {
				return fmt.Errorf("%s: %w", x, err)
			}
		default:
			if err := fits(x, field.Type, isStatus); err != nil {
				return err
			}
		}
	}
	if len(field.Enum) > 0 && !isStatus && !slices.Contains(xds, uiPrefix+"imagePullPolicy") {
		var enum []string
		for _, e := range field.Enum {
			var v string
			if err := json.Unmarshal(e.Raw, &v); err != nil {
				return fmt.Errorf("enum value %s is not a string", e.Raw)
			}
			enum = append(enum, v)
		}
		if !slices.Equal(selects, enum) {
			return fmt.Errorf("an enum field needs one %s<value> per value, in order: want %v, have %v", selectPrefix, enum, selects)
		}
	} else if len(selects) > 0 {
		return fmt.Errorf("select x-descriptors on a field that is not an enum")
	}
	return nil
}

// fits tells whether x-descriptor x can render a field of schema type typ.
func fits(x, typ string, isStatus bool) error {
	var want []string
	if isStatus {
		switch x {
		case conditionsXDesc:
			want = []string{"array"}
		case statusTextXDesc, "urn:alm:descriptor:io.kubernetes.phase", "urn:alm:descriptor:io.kubernetes.phase:reason", "urn:alm:descriptor:org.w3:link":
			want = []string{"string", "integer", "number", "boolean"}
		case uiPrefix + "hidden":
			return nil
		default:
			return fmt.Errorf("unknown status x-descriptor %s", x)
		}
	} else {
		switch strings.TrimPrefix(x, uiPrefix) {
		case "podCount", "number":
			want = []string{"integer", "number"}
		case "booleanSwitch", "checkbox":
			want = []string{"boolean"}
		case "text", "password", "imagePullPolicy":
			want = []string{"string"}
		case "resourceRequirements", "nodeAffinity", "podAffinity", "podAntiAffinity", "updateStrategy":
			want = []string{"object"}
		case "advanced", "hidden":
			return nil
		default:
			return fmt.Errorf("unknown spec x-descriptor %s", x)
		}
	}
	if !slices.Contains(want, typ) {
		return fmt.Errorf("%s does not fit a field of type %q", x, typ)
	}
	return nil
}

// schemaAt returns the schema of the dot-separated path under root.
func schemaAt(root *apiextensionsv1.JSONSchemaProps, path string) (*apiextensionsv1.JSONSchemaProps, error) {
	cur := root
	for _, part := range strings.Split(path, ".") {
		next, ok := cur.Properties[part]
		if !ok {
			return nil, fmt.Errorf("%s is not a field of the CRD's schema", path)
		}
		cur = &next
	}
	return cur, nil
}
