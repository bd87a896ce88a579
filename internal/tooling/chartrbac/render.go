package chartrbac

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The release a chart is rendered as: names chosen to be recognisable in
// what the chart makes of them, so that an object's name or namespace that
// holds one of them is known to come from the release's name or namespace.
// altRelease holds the chart's name (see renderAs): the usual fullname
// helper then gives the release's name alone, a second shape to allow.
const (
	probeRelease   = "rls-x7q"
	probeNamespace = "ns-x7q"
	altSuffix      = "-rls-y8w"
)

// object is one object a render made.
type object struct {
	Group, Version, Kind string
	Name, Namespace      string
	// Template is the template that made it, relative to the chart
	// ("templates/deployment.yaml", "charts/sub/templates/x.yaml").
	Template string
	Hook     bool
	// Release is the release name the chart was rendered as.
	Release string
	u       *unstructured.Unstructured
}

// render is what one set of values made of the chart.
type render struct {
	// Label names the values: "defaults" or "values a.b=true".
	Label   string
	Objects []object
}

// renderer renders one chart with the capabilities its templates probe.
type renderer struct {
	ch   *chart.Chart
	kube *chartutil.KubeVersion
	apis chartutil.VersionSet
}

// probePattern finds the API versions a template asks .Capabilities about.
var probePattern = regexp.MustCompile(`APIVersions\.Has\s+"([^"]+)"`)

func newRenderer(ch *chart.Chart, custom []apiKind) (*renderer, error) {
	kv, err := chartutil.ParseKubeVersion(BuiltinKubeVersion)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, k := range append(append([]apiKind{}, builtinKinds...), custom...) {
		gv := k.Version
		if k.Group != "" {
			gv = k.Group + "/" + k.Version
		}
		set[gv] = true
		set[gv+"/"+k.Kind] = true
	}
	// A probe of an API outside Kubernetes' own groups (a ServiceMonitor's
	// monitoring.coreos.com/v1) is answered yes, so that the template it
	// guards renders and its kind is seen; a probe of a Kubernetes API the
	// table does not list (policy/v1beta1/PodSecurityPolicy) is answered as
	// the cluster would, no.
	for _, t := range allTemplates(ch, "") {
		for _, m := range probePattern.FindAllStringSubmatch(string(t.data), -1) {
			group := ""
			if parts := strings.Split(m[1], "/"); len(parts) > 1 {
				group = parts[0]
			}
			if !builtinGroup(group) {
				set[m[1]] = true
			}
		}
	}
	return &renderer{ch: ch, kube: kv, apis: slices.Sorted(maps.Keys(set))}, nil
}

// template is one template file of a chart or of a subchart.
type template struct {
	path string // relative to the top chart
	data []byte
}

// allTemplates lists the templates of ch and its subcharts, with paths
// relative to the top chart (prefix is ch's own place in it).
func allTemplates(ch *chart.Chart, prefix string) []template {
	var out []template
	for _, f := range ch.Templates {
		out = append(out, template{path: prefix + f.Name, data: f.Data})
	}
	for _, d := range ch.Dependencies() {
		out = append(out, allTemplates(d, prefix+"charts/"+d.Name()+"/")...)
	}
	return out
}

// renderAs renders a fresh copy of the chart (Helm drops disabled
// subcharts from the chart it installs) as release name in probeNamespace
// with values over its defaults, as `helm install --dry-run` does on the
// client, hooks included.
func (r *renderer) renderAs(name, label string, values map[string]any) (*render, error) {
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.ReleaseName = name
	install.Namespace = probeNamespace
	install.KubeVersion = r.kube
	install.APIVersions = r.apis
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(copyChart(r.ch), values)
	if err != nil {
		return nil, err
	}
	out := &render{Label: label}
	top := r.ch.Name() + "/"
	// SplitManifests returns a map: walk it in the manifest's order, so that
	// objects of one template (two Roles in templates/role.yaml) keep their
	// order and the rules written from them are the same every run.
	docs := releaseutil.SplitManifests(rel.Manifest)
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		objs, err := decode(docs[k], top, name, false)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, objs...)
	}
	for _, h := range rel.Hooks {
		objs, err := decode("# Source: "+h.Path+"\n"+h.Manifest, top, name, true)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, objs...)
	}
	sort.SliceStable(out.Objects, func(i, j int) bool { return out.Objects[i].Template < out.Objects[j].Template })
	return out, nil
}

// decode reads the objects of one rendered document (the items of a
// List, which Helm's client creates one by one, each as an object).
func decode(doc, top, release string, hook bool) ([]object, error) {
	tmpl := ""
	for _, line := range strings.Split(doc, "\n") {
		if src, ok := strings.CutPrefix(line, "# Source: "); ok {
			tmpl = strings.TrimPrefix(strings.TrimSpace(src), top)
			break
		}
	}
	var out []object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(doc), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tmpl, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", tmpl, err)
			}
			for i := range l.Items {
				out = append(out, newObject(&l.Items[i], tmpl, release, hook))
			}
			continue
		}
		out = append(out, newObject(u, tmpl, release, hook))
	}
	return out, nil
}

func newObject(u *unstructured.Unstructured, tmpl, release string, hook bool) object {
	gvk := u.GroupVersionKind()
	return object{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: u.GetName(), Namespace: u.GetNamespace(),
		Template: tmpl, Hook: hook, Release: release, u: u}
}

// copyChart copies what an install changes of a chart: its dependencies
// (disabled ones are dropped), their metadata (Enabled) and values.
func copyChart(c *chart.Chart) *chart.Chart {
	md := *c.Metadata
	md.Dependencies = nil
	for _, d := range c.Metadata.Dependencies {
		dd := *d
		md.Dependencies = append(md.Dependencies, &dd)
	}
	n := &chart.Chart{Raw: c.Raw, Metadata: &md, Lock: c.Lock, Templates: c.Templates, Values: deepCopy(c.Values), Schema: c.Schema, Files: c.Files}
	for _, d := range c.Dependencies() {
		n.AddDependency(copyChart(d))
	}
	return n
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

// toggle is one change of the chart's values: a boolean flipped, or an
// `enabled` flag that is not set set true.
type toggle struct {
	path  []string
	value bool
}

func (t toggle) label() string {
	return fmt.Sprintf("values %s=%v", strings.Join(t.path, "."), t.value)
}

// values is the values that set the toggle alone.
func (t toggle) values() map[string]any {
	var v any = t.value
	for i := len(t.path) - 1; i >= 0; i-- {
		v = map[string]any{t.path[i]: v}
	}
	return v.(map[string]any)
}

// toggles lists every boolean of the chart's default values (its
// subcharts' included, under their names) flipped, and every key named
// enabled that holds no boolean set true, in path order. Lists are not
// entered: an item's flag needs the item's other fields.
func toggles(ch *chart.Chart) ([]toggle, error) {
	vals, err := chartutil.CoalesceValues(copyChart(ch), map[string]any{})
	if err != nil {
		return nil, err
	}
	var out []toggle
	var walk func(m map[string]any, path []string)
	walk = func(m map[string]any, path []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			p := append(slices.Clone(path), k)
			switch v := m[k].(type) {
			case bool:
				out = append(out, toggle{path: p, value: !v})
			case map[string]any:
				walk(v, p)
			case nil:
				if strings.EqualFold(k, "enabled") {
					out = append(out, toggle{path: p, value: true})
				}
			}
		}
	}
	walk(vals, nil)
	return out, nil
}
