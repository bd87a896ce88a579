package chartkit

import (
	"os"
	"path/filepath"
	"strings"
)

// The kustomization.yaml files of config/ list their resources one per line
// ("- file.yaml"), with comments and kubebuilder's scaffold markers between
// them; entries are added and removed as lines so that all of that stays.

// addResource adds "- entry" to the kustomization file at path if it is not
// listed: after the last line that after(line) accepts, else before the line
// marker, else at the end of the resources list (end of file).
func addResource(path, entry, marker string, after func(string) bool) (bool, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		data = []byte("resources:\n")
	} else if err != nil {
		return false, err
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	item := "- " + entry + "\n"
	for _, l := range lines {
		if strings.TrimRight(l, "\n") == "- "+entry {
			return false, nil
		}
	}
	at := -1
	if after != nil {
		for i, l := range lines {
			if strings.HasPrefix(l, "- ") && after(strings.TrimSpace(strings.TrimPrefix(l, "- "))) {
				at = i + 1
			}
		}
	}
	if at < 0 && marker != "" {
		for i, l := range lines {
			if strings.TrimSpace(l) == marker {
				at = i
				break
			}
		}
	}
	if at < 0 {
		at = len(lines)
		if at > 0 && !strings.HasSuffix(lines[at-1], "\n") {
			lines[at-1] += "\n"
		}
	}
	lines = append(lines[:at], append([]string{item}, lines[at:]...)...)
	return writeIfChanged(path, []byte(strings.Join(lines, "")))
}

// removeResource removes the line "- entry" from the kustomization at path.
func removeResource(path, entry string) (bool, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	lines := strings.SplitAfter(string(data), "\n")
	var kept []string
	for _, l := range lines {
		if strings.TrimRight(l, "\n") != "- "+entry {
			kept = append(kept, l)
		}
	}
	return writeIfChanged(path, []byte(strings.Join(kept, "")))
}

// Kustomizations the command edits, relative to the root, and their markers.
var (
	crdKustomization     = filepath.Join("config", "crd", "kustomization.yaml")
	samplesKustomization = filepath.Join("config", "samples", "kustomization.yaml")
	rbacKustomization    = filepath.Join("config", "rbac", "kustomization.yaml")
)

const (
	crdMarker     = "#+kubebuilder:scaffold:crdkustomizeresource"
	samplesMarker = "#+kubebuilder:scaffold:manifestskustomizesamples"
)

// isKindRole tells whether a resource is some kind's editor or viewer role.
func isKindRole(entry string) bool {
	return strings.HasSuffix(entry, "_editor_role.yaml") || strings.HasSuffix(entry, "_viewer_role.yaml")
}
