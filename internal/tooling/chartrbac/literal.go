package chartrbac

import (
	"path"
	"regexp"
	"strings"
)

// literal is a kind a template names at the top level of a document
// (`kind: X` at the start of a line), with the apiVersion beside it when
// that is literal too.
type literal struct {
	Group, Version, Kind string
	HasVersion           bool
	Template             string
}

var (
	kindLine       = regexp.MustCompile(`^kind:\s*["']?([A-Za-z][A-Za-z0-9]*)["']?\s*(#.*)?$`)
	apiVersionLine = regexp.MustCompile(`^apiVersion:\s*["']?([a-z0-9.\-]+/)?(v[0-9a-z]+)["']?\s*(#.*)?$`)
)

// literals scans every template of the chart (and its subcharts) for the
// kinds it names literally. Only column-0 `kind:` lines count: those of a
// document's top level; a binding's subjects or a roleRef are indented.
func literals(tmpls []template) []literal {
	var out []literal
	for _, t := range tmpls {
		if strings.EqualFold(path.Base(t.path), "NOTES.txt") {
			continue
		}
		for _, doc := range splitDocs(string(t.data)) {
			var kinds []string
			group, version, hasVersion := "", "", false
			for _, line := range strings.Split(doc, "\n") {
				line = strings.TrimRight(line, "\r")
				if m := kindLine.FindStringSubmatch(line); m != nil {
					kinds = append(kinds, m[1])
				}
				if m := apiVersionLine.FindStringSubmatch(line); m != nil && !hasVersion {
					group, version, hasVersion = strings.TrimSuffix(m[1], "/"), m[2], true
				}
			}
			for _, k := range kinds {
				l := literal{Kind: k, Template: t.path}
				// One kind and one literal apiVersion in the document:
				// they go together. Several kinds (branches of an if)
				// leave the version unknown.
				if hasVersion && len(kinds) == 1 {
					l.Group, l.Version, l.HasVersion = group, version, true
				}
				out = append(out, l)
			}
		}
	}
	return out
}

// splitDocs splits a template's text at its document separators.
func splitDocs(s string) []string {
	var docs []string
	var cur []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "---") {
			docs = append(docs, strings.Join(cur, "\n"))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, strings.Join(cur, "\n"))
}

// lookupCall is a template's call of Helm's lookup function, which reads an
// object (or lists objects) as the operator when the release renders.
type lookupCall struct {
	APIVersion, Kind, Namespace, Name string
	// ReleaseNamespace: the namespace argument is the release's.
	ReleaseNamespace bool
	// Literal: apiVersion and kind are literal strings, the namespace is a
	// literal or the release's, and the name a literal.
	Literal  bool
	Template string
}

// lookupPattern finds lookup's four arguments: a quoted string or one word.
var lookupPattern = regexp.MustCompile(`\blookup\s+("[^"]*"|[^\s()}]+)\s+("[^"]*"|[^\s()}]+)\s+("[^"]*"|[^\s()}]+)\s+("[^"]*"|[^\s()}]+)`)

// lookups lists the lookup calls of the templates.
func lookups(tmpls []template) []lookupCall {
	var out []lookupCall
	for _, t := range tmpls {
		for _, m := range lookupPattern.FindAllStringSubmatch(string(t.data), -1) {
			args := m[1:]
			lit := func(s string) (string, bool) {
				if len(s) >= 2 && strings.HasPrefix(s, `"`) && strings.HasSuffix(s, `"`) {
					return s[1 : len(s)-1], true
				}
				return "", false
			}
			c := lookupCall{Template: t.path, Literal: true}
			var ok bool
			if c.APIVersion, ok = lit(args[0]); !ok {
				c.Literal = false
			}
			if c.Kind, ok = lit(args[1]); !ok {
				c.Literal = false
			}
			switch a := strings.TrimPrefix(args[2], "$"); a {
			case ".Release.Namespace":
				c.ReleaseNamespace = true
			default:
				if c.Namespace, ok = lit(args[2]); !ok {
					c.Literal = false
				}
			}
			if c.Name, ok = lit(args[3]); !ok {
				c.Literal = false
			}
			out = append(out, c)
		}
	}
	return out
}
