package watches

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"text/template"

	sprig "github.com/go-task/slim-sprig/v3"
	"helm.sh/helm/v3/pkg/strvals"
)

// checkOverrides judges overrideValues at start, the way they are used later:
// helm-operator-plugins' loader expands each value from the environment and
// as a template (with sprig's functions) and drops the cause of a failure;
// the reconciler then sets each key=value on the spec with Helm's strvals.
// An error names the key and the cause, never the value, which may hold a
// secret from the environment.
func checkOverrides(overrides map[string]string) error {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := map[string]any{}
	for _, k := range keys {
		out, err := ExpandOverride(k, overrides[k], os.Getenv)
		if err != nil {
			return fmt.Errorf("field overrideValues: key %q: %w", k, err)
		}
		if err := strvals.ParseInto(k+"="+out, vals); err != nil {
			return fmt.Errorf("field overrideValues: key %q: cannot be set as a Helm value (key=value, as --set does): %w", k, err)
		}
	}
	return nil
}

// ExpandOverride expands the overrideValues value of key as helm-operator-plugins'
// loader does when the operator starts: variables from getenv, then the
// result as a Go template with sprig's functions (so that a value can cut its
// part out of a variable, e.g. the tag of a RELATED_IMAGE_* reference). The
// tools that render a chart as the operator will (make bundle, make chart)
// use it too.
func ExpandOverride(key, v string, getenv func(string) string) (string, error) {
	tpl, err := template.New(key).Funcs(sprig.TxtFuncMap()).Parse(os.Expand(v, getenv))
	if err != nil {
		return "", fmt.Errorf("not a valid template: %w", err)
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, nil); err != nil {
		return "", fmt.Errorf("its template fails: %w", err)
	}
	return out.String(), nil
}
