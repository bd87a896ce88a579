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
		expanded := os.ExpandEnv(overrides[k])
		tpl, err := template.New(k).Funcs(sprig.TxtFuncMap()).Parse(expanded)
		if err != nil {
			return fmt.Errorf("field overrideValues: key %q: not a valid template: %w", k, err)
		}
		var out bytes.Buffer
		if err := tpl.Execute(&out, nil); err != nil {
			return fmt.Errorf("field overrideValues: key %q: its template fails: %w", k, err)
		}
		if err := strvals.ParseInto(k+"="+out.String(), vals); err != nil {
			return fmt.Errorf("field overrideValues: key %q: cannot be set as a Helm value (key=value, as --set does): %w", k, err)
		}
	}
	return nil
}
