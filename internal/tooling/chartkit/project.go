package chartkit

import (
	"fmt"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// projectFile is kubebuilder's PROJECT file, relative to the root.
const projectFile = "PROJECT"

// projectDomain returns the PROJECT file's domain ("" without one).
func projectDomain(root string) (string, error) {
	doc, _, err := readDoc(filepath.Join(root, projectFile))
	if err != nil || doc == nil {
		return "", err
	}
	return str(doc.Content[0], "domain"), nil
}

// projectResource is a PROJECT resource entry as kubebuilder writes it for a
// Helm kind: its group split into the first label and the domain.
func projectResource(k kindNames) (*yaml.Node, error) {
	group, domain, _ := strings.Cut(k.Group, ".")
	return toNode(map[string]any{
		"api":     map[string]any{"crdVersion": "v1", "namespaced": true},
		"domain":  domain,
		"group":   group,
		"kind":    k.Kind,
		"version": k.Version,
	})
}

// sameResource tells whether a PROJECT resource entry is kind k's.
func sameResource(n *yaml.Node, kind string) bool { return str(n, "kind") == kind }

// writeProject adds or replaces the kind's PROJECT resource entry.
func writeProject(root string, k kindNames) (bool, error) {
	path := filepath.Join(root, projectFile)
	doc, _, err := readDoc(path)
	if err != nil {
		return false, err
	}
	if doc == nil {
		return false, fmt.Errorf("%s: not found; the project's root has one (kubebuilder's PROJECT file)", path)
	}
	m := doc.Content[0]
	res := get(m, "resources")
	if res == nil {
		res = &yaml.Node{Kind: yaml.SequenceNode}
		set(m, "resources", res)
	}
	entry, err := projectResource(k)
	if err != nil {
		return false, err
	}
	replaced := false
	for i, n := range res.Content {
		if sameResource(n, k.Kind) {
			if !sameNode(n, entry) {
				res.Content[i] = entry
			}
			replaced = true
		}
	}
	if !replaced {
		appendBlock(res, entry)
	}
	out, err := encodeDoc(doc)
	if err != nil {
		return false, err
	}
	return writeIfChanged(path, out)
}

// removeProject removes the kind's PROJECT resource entry.
func removeProject(root, kind string) (bool, error) {
	path := filepath.Join(root, projectFile)
	doc, _, err := readDoc(path)
	if err != nil || doc == nil {
		return false, err
	}
	res := get(doc.Content[0], "resources")
	if res == nil {
		return false, nil
	}
	if !removeItems(res, func(n *yaml.Node) bool { return sameResource(n, kind) }) {
		return false, nil
	}
	out, err := encodeDoc(doc)
	if err != nil {
		return false, err
	}
	return writeIfChanged(path, out)
}
