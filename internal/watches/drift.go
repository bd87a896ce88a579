package watches

import (
	"fmt"
	"strings"
)

// Drift modes of a watch entry's drift.mode.
const (
	DriftCorrect = "correct"
	DriftWarn    = "warn"
	DriftOff     = "off"
)

// Drift, our extension (drift: {mode, ignore}), is what a re-apply does
// with the drift of the releases' objects (docs/status.md, Drifted).
type Drift struct {
	// Mode is DriftCorrect (restore it, the default), DriftWarn (report it
	// and write nothing) or DriftOff (no check).
	Mode string
	// Ignore lists the differences neither corrected nor reported.
	Ignore []DriftIgnore
}

// DriftIgnore is one ignore rule: a difference matches when every part the
// rule sets matches (see release.DriftIgnore).
type DriftIgnore struct {
	// Paths are JSON pointers (RFC 6901) into the object ("/spec/replicas").
	Paths []string `json:"paths,omitempty"`
	// Manager and Subresource are those of the managedFields entry that
	// owns the field ("kube-controller-manager", "scale").
	Manager     string `json:"manager,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	// Target narrows the rule to objects by apiVersion, kind and name.
	Target *DriftTarget `json:"target,omitempty"`
}

// DriftTarget names the objects a rule applies to; each field set must match.
type DriftTarget struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
}

// driftEntry is the drift field of an entry.
type driftEntry struct {
	Mode   *string       `json:"mode,omitempty"`
	Ignore []DriftIgnore `json:"ignore,omitempty"`
}

// checkDrift validates the drift field of the entry name.
func checkDrift(name string, d *driftEntry) error {
	if d == nil {
		return nil
	}
	if err := oneOf(name, "drift.mode", d.Mode, DriftCorrect, DriftWarn, DriftOff); err != nil {
		return err
	}
	for i, r := range d.Ignore {
		field := fmt.Sprintf("drift.ignore[%d]", i)
		if len(r.Paths) == 0 && r.Manager == "" {
			return fmt.Errorf("%s: field %s: set paths, manager or both (a rule of neither would ignore every difference)", name, field)
		}
		for j, p := range r.Paths {
			if err := checkPointer(p); err != nil {
				return fmt.Errorf("%s: field %s.paths[%d]: %q %w", name, field, j, p, err)
			}
		}
	}
	return nil
}

// checkPointer checks that p is a JSON pointer (RFC 6901) to a field.
func checkPointer(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return fmt.Errorf("is not a JSON pointer to a field: it must start with / and name one (/spec/replicas)")
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Errorf("is not a JSON pointer: ~ must be written ~0, and / within a key ~1")
		}
	}
	return nil
}

// driftOf is the drift policy of a checked drift field, correct when unset.
func driftOf(d *driftEntry) Drift {
	if d == nil {
		return Drift{Mode: DriftCorrect}
	}
	return Drift{Mode: orDefault(d.Mode, DriftCorrect), Ignore: d.Ignore}
}
