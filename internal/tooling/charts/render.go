// Package charts renders the product charts in helm-charts/ the way the
// operator installs them, without a cluster. Its tests are the charts' tests.
package charts

import (
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Rendered is a chart rendered for one release.
type Rendered struct {
	// Manifests are the rendered objects, one YAML document each, in the order
	// Helm would install them.
	Manifests []string
	// Notes is the rendered NOTES.txt.
	Notes string
}

// Render loads the chart at dir and renders it as `helm install --dry-run`
// does on the client: values are merged over the chart's values.yaml and
// validated against its values.schema.json, so invalid values fail here as
// they would fail the operator's install.
func Render(dir, releaseName, namespace string, values map[string]any) (*Rendered, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	return RenderChart(ch, releaseName, namespace, values)
}

// RenderChart is Render for a chart already loaded.
func RenderChart(ch *chart.Chart, releaseName, namespace string, values map[string]any) (*Rendered, error) {
	return renderChart(ch, releaseName, namespace, values, false)
}

// renderChart is RenderChart; with skipSchema, the values are not checked
// against values.schema.json, so a test sees what the templates alone make
// of a value the schema would refuse (helm install --skip-schema-validation).
func renderChart(ch *chart.Chart, releaseName, namespace string, values map[string]any, skipSchema bool) (*Rendered, error) {
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.SkipSchemaValidation = skipSchema
	install.ReleaseName = releaseName
	install.Namespace = namespace
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, err
	}
	// Helm stores the manifest in install order; keep that order.
	split := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	out := &Rendered{Notes: rel.Info.Notes}
	for _, k := range keys {
		if strings.TrimSpace(split[k]) != "" {
			out.Manifests = append(out.Manifests, split[k])
		}
	}
	return out, nil
}
