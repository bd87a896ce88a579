package release

import (
	"sort"
)

// A chart whose templates render differently each time with the same
// values and chart (randAlphaNum, now, uuidv4) would, in an operator that
// upgrades when the rendered manifest differs from the deployed one,
// upgrade on every reconcile. This operator decides upgrades from the
// digests of the values and the chart, never from a render, so such a
// chart makes one revision per real change; it is still told: the
// deployed manifest is one of many renders, and a user should know which
// templates make it so.

// rendersDifferently renders the chart a second time with the same values
// and returns the names of the templates whose output differs from first,
// sorted; nil when first is nil (the chart did not render: Helm says why)
// or every template rendered the same. It costs a render, no request, and
// runs only before an install or an upgrade.
func (r *Runner) rendersDifferently(first *rendering, vals map[string]any, upgrade bool) []string {
	if first == nil {
		return nil
	}
	second, err := r.render(vals, upgrade)
	if err != nil || second == nil {
		return nil
	}
	var names []string
	for name, content := range first.files {
		if second.files[name] != content {
			names = append(names, name)
		}
	}
	for name := range second.files {
		if _, ok := first.files[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
