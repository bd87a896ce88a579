package chartkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// The project's YAML files are edited as yaml.v3 node trees, so that their
// comments, key order and layout survive: decoding and encoding an unchanged
// file gives its bytes back (two-space indent, sequences not indented under
// their key, as kubebuilder writes them).

// readDoc reads a YAML file as a node tree; a missing file is a nil node.
func readDoc(path string) (*yaml.Node, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind == 0 {
		return nil, data, nil
	}
	return &doc, data, nil
}

// encodeDoc renders a node tree the way the project's files are written.
func encodeDoc(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeIfChanged writes data to path only when the file's bytes differ, and
// tells whether it wrote.
func writeIfChanged(path string, data []byte) (bool, error) {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(path, data, 0o644)
}

// removeIfExists removes path and tells whether it was there.
func removeIfExists(path string) (bool, error) {
	err := os.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// toNode converts a value to a node through its JSON form, so that json
// struct tags (omitempty included) decide the keys, sorted.
func toNode(v any) (*yaml.Node, error) {
	data, err := sigsyaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	return doc.Content[0], nil
}

// scalar is a plain string node.
func scalar(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// get returns the value of key in mapping m, or nil.
func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// str returns the string value of key in mapping m, or "".
func str(m *yaml.Node, key string) string {
	if v := get(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// set sets key in mapping m to v, in place when the key exists (its
// comments stay), else appended.
func set(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, scalar(key), v)
}

// setStr sets key to a string, keeping the node (and its style and comments)
// when the value is already that string.
func setStr(m *yaml.Node, key, value string) {
	if v := get(m, key); v != nil && v.Kind == yaml.ScalarNode && v.Value == value {
		return
	}
	set(m, key, scalar(value))
}

// del removes key from mapping m.
func del(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// appendBlock appends nodes to a sequence or mapping, which becomes block
// style again if it was emptied into a flow `[]` or `{}`.
func appendBlock(n *yaml.Node, items ...*yaml.Node) {
	n.Style &^= yaml.FlowStyle
	n.Content = append(n.Content, items...)
}

// removeItems removes the items of seq that drop accepts and tells whether
// it removed any. The comment above the first item (often the file's own
// header) moves to the new first item, or to the list itself.
func removeItems(seq *yaml.Node, drop func(*yaml.Node) bool) bool {
	var kept []*yaml.Node
	head := ""
	for i, n := range seq.Content {
		if drop(n) {
			if i == 0 {
				head = n.HeadComment
			}
			continue
		}
		kept = append(kept, n)
	}
	if len(kept) == len(seq.Content) {
		return false
	}
	if head != "" {
		if len(kept) > 0 {
			kept[0].HeadComment = strings.TrimSpace(head + "\n" + kept[0].HeadComment)
		} else {
			seq.HeadComment = strings.TrimSpace(head + "\n" + seq.HeadComment)
		}
	}
	seq.Content = kept
	return true
}
