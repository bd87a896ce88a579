package watches

import (
	"errors"
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/readiness"
)

// healthCheckEntry is one item of the healthChecks field of an entry: CEL
// expressions that judge the objects of one apiVersion and kind
// (readiness.HealthCheck).
type healthCheckEntry struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current,omitempty"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
	Message    string `json:"message,omitempty"`
	Optional   bool   `json:"optional,omitempty"`
}

// healthRules checks and compiles the healthChecks of the entry e, the
// index-th (from 0) of the file raw. A bad expression names its field and
// its line in the file, and CEL's error.
func healthRules(e entry, raw []byte, index int) (*readiness.Rules, error) {
	name := entryName(e)
	checks := make([]readiness.HealthCheck, 0, len(e.HealthChecks))
	seen := map[schema.GroupVersionKind]int{}
	for i, h := range e.HealthChecks {
		field := fmt.Sprintf("healthChecks[%d]", i)
		gv, err := schema.ParseGroupVersion(h.APIVersion)
		switch {
		case h.APIVersion == "":
			return nil, fmt.Errorf("%s: field %s.apiVersion is required", name, field)
		case err != nil || gv.Version == "":
			return nil, fmt.Errorf("%s: field %s.apiVersion must be group/version (or v1), got %q", name, field, h.APIVersion)
		case h.Kind == "":
			return nil, fmt.Errorf("%s: field %s.kind is required", name, field)
		case strings.TrimSpace(h.Current) == "" && strings.TrimSpace(h.Failed) == "" && !h.Optional:
			return nil, fmt.Errorf("%s: field %s: set current or failed (or optional: true alone)", name, field)
		case strings.TrimSpace(h.Current) == "" && strings.TrimSpace(h.Failed) == "" &&
			(strings.TrimSpace(h.InProgress) != "" || strings.TrimSpace(h.Message) != ""):
			return nil, fmt.Errorf("%s: field %s: inProgress and message need current or failed", name, field)
		}
		gvk := gv.WithKind(h.Kind)
		if j, dup := seen[gvk]; dup {
			return nil, fmt.Errorf("%s: field %s: %s %s already has a health check, healthChecks[%d]", name, field, h.APIVersion, h.Kind, j)
		}
		seen[gvk] = i
		checks = append(checks, readiness.HealthCheck{APIVersion: h.APIVersion, Kind: h.Kind,
			Current: h.Current, InProgress: h.InProgress, Failed: h.Failed, Message: h.Message, Optional: h.Optional})
	}
	rules, err := readiness.CompileRules(checks)
	var ce *readiness.CompileError
	if errors.As(err, &ce) {
		field := fmt.Sprintf("healthChecks[%d].%s", ce.Index, ce.Field)
		if line := lineOf(raw, index, "healthChecks", ce.Index, ce.Field); line > 0 {
			return nil, fmt.Errorf("%s: field %s (line %d): %v", name, field, line, ce.Err)
		}
		return nil, fmt.Errorf("%s: field %s: %v", name, field, ce.Err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: field healthChecks: %w", name, err)
	}
	return rules, nil
}

// lineOf finds the line, in the watches file raw, of the value of
// entries[index].list[item].key; 0 when it cannot be found (the file was
// already read as YAML, so it parses).
func lineOf(raw []byte, index int, list string, item int, key string) int {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) != nil || len(doc.Content) == 0 {
		return 0
	}
	entries := doc.Content[0]
	if entries.Kind != yamlv3.SequenceNode || index >= len(entries.Content) {
		return 0
	}
	items := value(entries.Content[index], list)
	if items == nil || items.Kind != yamlv3.SequenceNode || item >= len(items.Content) {
		return 0
	}
	if v := value(items.Content[item], key); v != nil {
		return v.Line
	}
	return items.Content[item].Line
}

// value is the value of key in the mapping node m, nil when absent.
func value(m *yamlv3.Node, key string) *yamlv3.Node {
	if m.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
