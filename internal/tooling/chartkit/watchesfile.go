package chartkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	hopwatches "github.com/operator-framework/helm-operator-plugins/pkg/watches"
	yaml "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// watchesFile is the project's watches file, relative to the root.
const watchesFile = "watches.yaml"

// watchEntry is the part of a watches.yaml entry the command reads.
type watchEntry struct {
	Group          string            `json:"group"`
	Version        string            `json:"version"`
	Kind           string            `json:"kind"`
	Chart          string            `json:"chart"`
	OverrideValues map[string]string `json:"overrideValues,omitempty"`
}

// readWatches reads the entries of root's watches.yaml (none if it is
// missing).
func readWatches(root string) ([]watchEntry, error) {
	data, err := os.ReadFile(filepath.Join(root, watchesFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ws []watchEntry
	if err := sigsyaml.Unmarshal(data, &ws); err != nil {
		return nil, fmt.Errorf("%s: %w", watchesFile, err)
	}
	return ws, nil
}

// loadWatches returns root's watches.yaml entries with their charts loaded
// from root, as crdgen.Generate takes them (watches.Load would resolve the
// chart paths against the working directory instead).
func loadWatches(root string) ([]hopwatches.Watch, error) {
	entries, err := readWatches(root)
	if err != nil {
		return nil, err
	}
	var out []hopwatches.Watch
	for _, e := range entries {
		ch, err := loader.Load(filepath.Join(root, e.Chart))
		if err != nil {
			return nil, fmt.Errorf("%s: kind %s: chart %s: %w", watchesFile, e.Kind, e.Chart, err)
		}
		out = append(out, hopwatches.Watch{
			GroupVersionKind: schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind},
			ChartPath:        e.Chart,
			Chart:            ch,
		})
	}
	return out, nil
}

// relatedImageOwned tells whether an overrideValues value is one the command
// wrote: it reads a RELATED_IMAGE_ variable.
func relatedImageOwned(v string) bool { return strings.Contains(v, "$RELATED_IMAGE_") }

// writeWatch adds or updates kind's entry in watches.yaml. The command owns
// group, version, chart, scope and the overrideValues that read a
// RELATED_IMAGE_ variable; every other field of an existing entry (and its
// comments) stays as it is. skipCRDs, when set, says whether crds.install
// is Skip (the chart's crds/ ship with the operator: make chart CRDS=bundle)
// or not; nil leaves the crds field alone.
func writeWatch(root string, e watchEntry, overrides []override, scope watches.Scope, skipCRDs *bool) (bool, error) {
	path := filepath.Join(root, watchesFile)
	doc, _, err := readDoc(path)
	if err != nil {
		return false, err
	}
	if doc == nil {
		doc = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.SequenceNode}}}
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode {
		return false, fmt.Errorf("%s: want a list of entries", watchesFile)
	}
	var m *yaml.Node
	for _, n := range seq.Content {
		if str(n, "kind") == e.Kind {
			m = n
		}
	}
	if m == nil {
		m = &yaml.Node{Kind: yaml.MappingNode}
		appendBlock(seq, m)
	}
	setStr(m, "group", e.Group)
	setStr(m, "version", e.Version)
	setStr(m, "kind", e.Kind)
	setStr(m, "chart", e.Chart)

	ov := get(m, "overrideValues")
	if ov == nil || ov.Kind != yaml.MappingNode {
		ov = &yaml.Node{Kind: yaml.MappingNode}
	}
	want := map[string]string{}
	for _, o := range overrides {
		want[o.Key] = o.Value
	}
	var kept []*yaml.Node
	for i := 0; i+1 < len(ov.Content); i += 2 {
		k, v := ov.Content[i], ov.Content[i+1]
		if w, ok := want[k.Value]; ok {
			if v.Value != w {
				v = scalar(w)
			}
			delete(want, k.Value)
		} else if relatedImageOwned(v.Value) {
			continue
		}
		kept = append(kept, k, v)
	}
	for _, o := range overrides {
		if _, ok := want[o.Key]; ok {
			kept = append(kept, scalar(o.Key), scalar(o.Value))
		}
	}
	ov.Content = nil
	appendBlock(ov, kept...)
	if len(kept) > 0 {
		set(m, "overrideValues", ov)
	} else {
		del(m, "overrideValues")
	}

	if len(scope.ClusterScoped) == 0 && len(scope.Namespaces) == 0 {
		del(m, "scope")
	} else {
		n, err := toNode(struct {
			ClusterScoped []watches.ScopeRule `json:"clusterScoped,omitempty"`
			Namespaces    []watches.ScopeRule `json:"namespaces,omitempty"`
		}{scope.ClusterScoped, scope.Namespaces})
		if err != nil {
			return false, err
		}
		if old := get(m, "scope"); old == nil || !sameNode(old, n) {
			set(m, "scope", n)
		}
	}

	if skipCRDs != nil {
		crds := get(m, "crds")
		if crds == nil || crds.Kind != yaml.MappingNode {
			crds = &yaml.Node{Kind: yaml.MappingNode}
		}
		if *skipCRDs {
			setStr(crds, "install", watches.CRDSkip)
		} else if str(crds, "install") == watches.CRDSkip {
			del(crds, "install")
		}
		if len(crds.Content) > 0 {
			set(m, "crds", crds)
		} else {
			del(m, "crds")
		}
	}

	out, err := encodeDoc(doc)
	if err != nil {
		return false, err
	}
	return writeIfChanged(path, out)
}

// removeWatch removes kind's entry from watches.yaml.
func removeWatch(root, kind string) (bool, error) {
	path := filepath.Join(root, watchesFile)
	doc, _, err := readDoc(path)
	if err != nil || doc == nil {
		return false, err
	}
	seq := doc.Content[0]
	if !removeItems(seq, func(n *yaml.Node) bool { return str(n, "kind") == kind }) {
		return false, nil
	}
	out, err := encodeDoc(doc)
	if err != nil {
		return false, err
	}
	return writeIfChanged(path, out)
}

// sameNode compares two nodes by their encoding.
func sameNode(a, b *yaml.Node) bool {
	x, err1 := encodeDoc(a)
	y, err2 := encodeDoc(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
