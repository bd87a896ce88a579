package chartkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	yaml "go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/tooling/chartrbac"
)

// csvGlob finds the base ClusterServiceVersion `make bundle` starts from.
var csvGlob = filepath.Join("config", "manifests", "bases", "*.clusterserviceversion.yaml")

// csvPath returns the base CSV's path, or "" if the project has none.
func csvPath(root string) (string, error) {
	m, err := filepath.Glob(filepath.Join(root, csvGlob))
	if err != nil || len(m) == 0 {
		return "", err
	}
	if len(m) > 1 {
		return "", fmt.Errorf("more than one base CSV: %s", strings.Join(m, ", "))
	}
	return m[0], nil
}

// ownedInput is what the kind's owned CRD description is made of.
type ownedInput struct {
	names       kindNames
	description string // the chart's Chart.yaml description
	spec        *apiextensionsv1.JSONSchemaProps
	kinds       []chartrbac.Kind
	sampleSpec  map[string]any // the sample's spec, whose top-level fields need descriptors
}

// statusDescriptors describe the status every kind shares (the operator's
// status contract), as the project's existing owned CRDs do.
func statusDescriptors() []v1alpha1.StatusDescriptor {
	text := []string{"urn:alm:descriptor:text"}
	return []v1alpha1.StatusDescriptor{
		{Path: "phase", DisplayName: "Phase", Description: `Ready's verdict in one string: Ready, "Stalled: <reason>", "NotReady: <reason>" or "Progressing: <reason>". Derived from the Ready condition.`, XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.phase"}},
		{Path: "conditions", DisplayName: "Conditions", Description: "The state of the release, one condition per aspect; Ready summarizes them. See the operator's description for each type and reason.", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.conditions"}},
		{Path: "deployedRelease.revision", DisplayName: "Deployed Revision", Description: "Revision of the deployed Helm release.", XDescriptors: text},
		{Path: "resources.ready", DisplayName: "Ready Objects", Description: "Objects of the deployed release that are ready.", XDescriptors: text},
		{Path: "resources.total", DisplayName: "Total Objects", Description: "Objects of the deployed release.", XDescriptors: text},
		{Path: "deployedRelease.chartVersion", DisplayName: "Chart Version", Description: "Version of the chart the deployed release was installed from.", XDescriptors: text},
		{Path: "failedRelease.reason", DisplayName: "Last Failure Reason", Description: "Reason of the latest failed install, upgrade or uninstall (InstallError, UpgradeError, UninstallError, ...); kept after recovery.", XDescriptors: text},
		{Path: "failedRelease.message", DisplayName: "Last Failure Message", Description: "What went wrong in the latest failed install, upgrade or uninstall; kept after recovery.", XDescriptors: text},
	}
}

// ownedCRD returns the kind's owned CRD description, merged into old (the
// entry already in the CSV, or nil). The command owns the status descriptors
// and, when discovery found kinds, the resources; an author's displayName,
// description and spec descriptors stay, descriptors whose path the schema no
// longer has go, and each top-level field of the sample's spec gets one if it
// has none. A new entry describes every top-level field of the spec.
func ownedCRD(in ownedInput, old *v1alpha1.CRDDescription) v1alpha1.CRDDescription {
	d := v1alpha1.CRDDescription{
		Name:    in.names.Plural + "." + in.names.Group,
		Version: in.names.Version,
		Kind:    in.names.Kind,
	}
	if old != nil {
		d.DisplayName, d.Description = old.DisplayName, old.Description
		d.Resources = old.Resources
		for _, sd := range old.SpecDescriptors {
			if hasPath(in.spec, sd.Path) {
				d.SpecDescriptors = append(d.SpecDescriptors, sd)
			}
		}
	}
	if d.DisplayName == "" {
		d.DisplayName = words(in.names.Kind)
	}
	if d.Description == "" {
		d.Description = oneLine(in.description)
		if d.Description == "" {
			d.Description = fmt.Sprintf("A release of the Helm chart %s.", in.names.Chart)
		}
	}
	if res := resources(in.kinds); len(in.kinds) > 0 || len(d.Resources) == 0 {
		d.Resources = res
	}

	described := map[string]bool{}
	for _, sd := range d.SpecDescriptors {
		described[sd.Path] = true
	}
	var fields []string
	if old == nil && in.spec != nil {
		for k := range in.spec.Properties {
			fields = append(fields, k)
		}
	}
	for k := range in.sampleSpec {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	for _, f := range fields {
		if described[f] || !hasPath(in.spec, f) {
			continue
		}
		if sd, ok := specDescriptor(f, in.spec.Properties[f]); ok {
			d.SpecDescriptors = append(d.SpecDescriptors, sd)
			described[f] = true
		}
	}
	d.StatusDescriptors = statusDescriptors()
	return d
}

// resources are the kinds a release creates, for the console: each kind
// discovery found, and the Secrets that hold Helm's release records.
func resources(kinds []chartrbac.Kind) []v1alpha1.APIResourceReference {
	seen := map[string]bool{}
	out := []v1alpha1.APIResourceReference{}
	add := func(r v1alpha1.APIResourceReference) {
		if k := r.Kind + "/" + r.Version; !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	add(v1alpha1.APIResourceReference{Kind: "Secret", Version: "v1"})
	for _, k := range kinds {
		r := v1alpha1.APIResourceReference{Kind: k.Kind, Version: k.Version}
		// Name is the plural of a custom resource, empty for Kubernetes'
		// own kinds.
		if strings.Contains(k.Group, ".") && !strings.HasSuffix(k.Group, ".k8s.io") {
			r.Name = k.Resource
		}
		add(r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Version < out[j].Version
	})
	return out
}

// specDescriptor describes one top-level spec field, with the x-descriptor
// that fits its type (the rules internal/tooling/bundle checks). A field with
// a non-string enum gets none: the console has no select for it.
func specDescriptor(field string, p apiextensionsv1.JSONSchemaProps) (v1alpha1.SpecDescriptor, bool) {
	sd := v1alpha1.SpecDescriptor{Path: field, DisplayName: words(field), Description: oneLine(p.Description)}
	const ui = "urn:alm:descriptor:com.tectonic.ui:"
	if len(p.Enum) > 0 {
		for _, e := range p.Enum {
			var s string
			if err := json.Unmarshal(e.Raw, &s); err != nil {
				return sd, false
			}
			sd.XDescriptors = append(sd.XDescriptors, ui+"select:"+s)
		}
		return sd, true
	}
	switch p.Type {
	case "boolean":
		sd.XDescriptors = []string{ui + "booleanSwitch"}
	case "integer", "number":
		if field == "replicaCount" || field == "replicas" {
			sd.XDescriptors = []string{ui + "podCount"}
		} else {
			sd.XDescriptors = []string{ui + "number"}
		}
	case "string":
		sd.XDescriptors = []string{ui + "text"}
	case "object":
		if field == "resources" {
			sd.XDescriptors = []string{ui + "resourceRequirements"}
		}
	}
	return sd, true
}

// hasPath tells whether a dot-separated path is a field of the spec schema.
func hasPath(spec *apiextensionsv1.JSONSchemaProps, path string) bool {
	cur := spec
	for _, part := range strings.Split(path, ".") {
		if cur == nil {
			return false
		}
		next, ok := cur.Properties[part]
		if !ok {
			return false
		}
		cur = &next
	}
	return true
}

// words splits a camelCase name into capitalized words: "replicaCount" ->
// "Replica Count", "SealedSecrets" -> "Sealed Secrets".
func words(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if i == 0 {
			b.WriteRune(unicode.ToUpper(r))
			continue
		}
		if unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ownedList returns the base CSV's owned CRD list node, created if missing.
func ownedList(doc *yaml.Node) (*yaml.Node, error) {
	spec := get(doc.Content[0], "spec")
	if spec == nil || spec.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the base CSV has no spec")
	}
	crds := get(spec, "customresourcedefinitions")
	if crds == nil || crds.Kind != yaml.MappingNode {
		crds = &yaml.Node{Kind: yaml.MappingNode}
		set(spec, "customresourcedefinitions", crds)
	}
	owned := get(crds, "owned")
	if owned == nil || owned.Kind != yaml.SequenceNode {
		owned = &yaml.Node{Kind: yaml.SequenceNode}
		set(crds, "owned", owned)
	}
	return owned, nil
}

// errUnchanged, returned by an edit of editOwned, leaves the CSV unwritten.
var errUnchanged = errors.New("unchanged")

// editOwned reads the base CSV, lets edit change its owned CRD list, and
// writes it back when its bytes changed (never when edit returns
// errUnchanged). A project without a base CSV has nothing to edit.
func editOwned(root string, edit func(path string, owned *yaml.Node) error) (bool, error) {
	path, err := csvPath(root)
	if err != nil || path == "" {
		return false, err
	}
	doc, _, err := readDoc(path)
	if err != nil {
		return false, err
	}
	owned, err := ownedList(doc)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if err := edit(path, owned); errors.Is(err, errUnchanged) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	out, err := encodeDoc(doc)
	if err != nil {
		return false, err
	}
	return writeIfChanged(path, out)
}

// writeCSV adds or updates the kind's owned CRD in the base CSV.
func writeCSV(root string, in ownedInput) (bool, error) {
	return editOwned(root, func(path string, owned *yaml.Node) error { return upsertOwned(path, owned, in) })
}

// upsertOwned adds or updates the kind's entry of the owned list.
func upsertOwned(path string, owned *yaml.Node, in ownedInput) error {
	at := -1
	var old *v1alpha1.CRDDescription
	for i, n := range owned.Content {
		if str(n, "kind") == in.names.Kind {
			raw, err := encodeDoc(n)
			if err != nil {
				return err
			}
			old = &v1alpha1.CRDDescription{}
			if err := sigsyaml.Unmarshal(raw, old); err != nil {
				return fmt.Errorf("%s: owned CRD %s: %w", path, in.names.Kind, err)
			}
			at = i
		}
	}
	n, err := toNode(ownedCRD(in, old))
	if err != nil {
		return err
	}
	switch {
	case at < 0:
		appendBlock(owned, n)
	case !sameNode(owned.Content[at], n):
		owned.Content[at] = n
	}
	return nil
}

// removeCSV removes the kind's owned CRD from the base CSV.
func removeCSV(root, kind string) (bool, error) {
	return editOwned(root, func(_ string, owned *yaml.Node) error {
		if !removeItems(owned, func(n *yaml.Node) bool { return str(n, "kind") == kind }) {
			return errUnchanged
		}
		return nil
	})
}
