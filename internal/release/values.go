package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Values returns the values of obj's release: its spec, with the watch's
// override values (already expanded from the environment) set on top.
func Values(obj *unstructured.Unstructured, overrides map[string]string) (map[string]any, error) {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	if err != nil {
		return nil, &Error{Reason: status.ReasonErrorGettingValues, Summary: "Reading spec as values", Err: err}
	}
	vals := runtime.DeepCopyJSON(spec)
	if vals == nil {
		vals = map[string]any{}
	}
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := strvals.ParseInto(k+"="+overrides[k], vals); err != nil {
			return nil, &Error{Reason: status.ReasonErrorGettingValues,
				Summary: fmt.Sprintf("Applying the override value %q of watches.yaml", k), Err: err}
		}
	}
	return vals, nil
}

// ValidateValues checks vals against the chart's values.schema.json the way
// Helm does (after merging the chart's defaults), before any Helm action runs,
// so that rejected values never reach Helm's storage.
func ValidateValues(chrt *chart.Chart, vals map[string]any, summary string) error {
	merged, err := chartutil.CoalesceValues(chrt, vals)
	if err != nil {
		return &Error{Reason: status.ReasonErrorGettingValues, Summary: summary, Err: err}
	}
	if err := chartutil.ValidateAgainstSchema(chrt, merged); err != nil {
		return &Error{StalledReason: status.ReasonInvalidValues, Summary: summary, Err: err}
	}
	return nil
}

// ValuesDigest is Digest of a release's values, with no values and empty
// values alike: what the decisions compare, never published (an unkeyed
// digest of values is a test of guessed secrets; the status shows
// DigestKey.Values).
func ValuesDigest(vals map[string]any) string {
	if vals == nil {
		vals = map[string]any{}
	}
	return Digest(vals)
}

// Digest returns "sha256:<hex>" of v's JSON encoding (map keys sorted), so
// that equal values give equal digests whichever way they were decoded.
func Digest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Values decoded from JSON always encode; keep the digest total anyway.
		b = []byte(fmt.Sprintf("%#v", v))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ChartDigest identifies a chart's content: metadata, templates, default
// values, schema and, recursively, its dependencies. Helm's release record
// does not keep subcharts, so the digest is stored as a release label.
func ChartDigest(chrt *chart.Chart) string { return chartDigest(chrt, true) }

// chartDigest is ChartDigest when whole; else that of the chart alone: what a
// release record keeps of its chart, less its default values, which Helm
// rewrites in the record of an upgrade with --reuse-values (the values of
// the release are compared on their own).
func chartDigest(chrt *chart.Chart, whole bool) string {
	h := sha256.New()
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		meta, _ := json.Marshal(c.Metadata)
		var vals []byte
		if whole {
			vals, _ = json.Marshal(c.Values)
		}
		fmt.Fprintf(h, "chart %d:%s\nvalues %d:%s\nschema %d:%s\n", len(meta), meta, len(vals), vals, len(c.Schema), c.Schema)
		tpls := append([]*chart.File(nil), c.Templates...)
		sort.Slice(tpls, func(i, j int) bool { return tpls[i].Name < tpls[j].Name })
		for _, t := range tpls {
			fmt.Fprintf(h, "template %s %d:%s\n", t.Name, len(t.Data), t.Data)
		}
		if !whole {
			return
		}
		deps := append([]*chart.Chart(nil), c.Dependencies()...)
		sort.Slice(deps, func(i, j int) bool { return deps[i].Name() < deps[j].Name() })
		for _, d := range deps {
			walk(d)
		}
	}
	walk(chrt)
	// A label value holds at most 63 characters: 32 hex digits are plenty to
	// tell two charts apart.
	return hex.EncodeToString(h.Sum(nil))[:32]
}
