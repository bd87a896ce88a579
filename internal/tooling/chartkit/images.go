package chartkit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/distribution/reference"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// override is one watches.yaml overrideValues entry.
type override struct{ Key, Value string }

// relatedImage is one RELATED_IMAGE_* variable of the manager: its name and
// the image the chart's defaults run, fully qualified.
type relatedImage struct{ Env, Image string }

// imageMap is what mapImages found.
type imageMap struct {
	Overrides []override
	Images    []relatedImage
	// Unmapped names each image, or image value, that could not be mapped,
	// one line each, with the reason.
	Unmapped []string
}

// An image value of the chart's defaults is one of three shapes, each mapped
// to overrides that read the whole image reference from one variable
// ($RELATED_IMAGE_<KIND>[_<N>], operator-sdk's convention, which OLM mirrors
// and `make bundle` pins to a digest):
//
//   - a map with `reference` (our charts' image.reference, used instead of
//     repository and tag when set): that key gets the variable;
//   - a map with `repository` and a tag field (`tag`, or gatekeeper's
//     `release`), and optionally `registry`: each field gets its part of the
//     reference, cut with sprig's regex functions in the override's template
//     (the operator expands overrideValues from the environment and then as a
//     template). A digest reference is cut so that registry/repository:tag
//     joins back into it: "repo@sha256" and the hex;
//   - a string at a key named `image` or ending in `Image`: the key gets the
//     variable.
//
// A candidate is kept only if Helm honours it: the chart is rendered with the
// variable set to a probe reference, tagged and by digest, and some container
// must then run exactly that reference. Everything else is reported.
const (
	probeTag    = "registry.invalid/chartkit/probe:v1"
	probeDigest = "registry.invalid/chartkit/probe@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// candidate is one image value of the defaults and the overrides that would
// map it to the variable named by the placeholder envPlaceholder.
type candidate struct {
	path      string
	overrides []override
}

const envPlaceholder = "RELATED_IMAGE_CHARTKIT_PROBE"

// Override templates: each cuts one part out of the reference in $V. The
// templates fall back to the chart's default of their value (orDefault) while
// the variable is unset, e.g. under `make run`, as our charts fall back to
// image.repository and image.tag when image.reference is empty.
const (
	tmplRegistry         = `{{ regexFind "^[^/]+" "$V" }}`
	tmplRepository       = `{{ regexReplaceAll ":[^:/]+$" "$V" "" }}`
	tmplRepositoryNoHost = `{{ regexReplaceAll "^[^/]+/" (regexReplaceAll ":[^:/]+$" "$V" "") "" }}`
	tmplTag              = `{{ regexFind ":[^:/]+$" "$V" | trimPrefix ":" }}`
	tmplWhole            = `{{ "$V" }}`
)

// orDefault makes an override template yield def when it yields nothing.
func orDefault(tmpl string, def any) string {
	s := ""
	if def != nil {
		s = fmt.Sprint(def)
	}
	if s == "" {
		return tmpl
	}
	return strings.TrimSuffix(tmpl, " }}") + fmt.Sprintf(" | default %q }}", s)
}

// candidates walks the chart's default values (subcharts' included, under
// their names) for image values.
func candidates(ch *chart.Chart) ([]candidate, error) {
	vals, err := chartutil.CoalesceValues(ch, map[string]any{})
	if err != nil {
		return nil, err
	}
	var out []candidate
	var walk func(path string, v any, key string)
	walk = func(path string, v any, key string) {
		with := func(tmpl string, def any) string {
			return orDefault(strings.ReplaceAll(tmpl, "$V", "$"+envPlaceholder), def)
		}
		switch t := v.(type) {
		case map[string]any:
			if _, ok := t["reference"].(string); ok {
				out = append(out, candidate{path, []override{{join(path, "reference"), "$" + envPlaceholder}}})
				return
			}
			if repo, ok := t["repository"].(string); ok && repo != "" {
				tagKey := ""
				for _, k := range []string{"tag", "release"} {
					if _, ok := t[k]; ok {
						tagKey = k
						break
					}
				}
				c := candidate{path: path}
				switch {
				case tagKey == "":
					c.overrides = []override{{join(path, "repository"), with(tmplWhole, repo)}}
				case t["registry"] != nil:
					c.overrides = []override{
						{join(path, "registry"), with(tmplRegistry, t["registry"])},
						{join(path, "repository"), with(tmplRepositoryNoHost, repo)},
						{join(path, tagKey), with(tmplTag, t[tagKey])},
					}
				default:
					c.overrides = []override{
						{join(path, "repository"), with(tmplRepository, repo)},
						{join(path, tagKey), with(tmplTag, t[tagKey])},
					}
				}
				out = append(out, c)
				return
			}
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(join(path, k), t[k], k)
			}
		case string:
			lk := strings.ToLower(key)
			if t != "" && (lk == "image" || strings.HasSuffix(lk, "image")) && looksLikeImage(t) {
				out = append(out, candidate{path, []override{{path, with(tmplWhole, t)}}})
			}
		}
	}
	walk("", map[string]any(vals), "")
	return out, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func looksLikeImage(s string) bool {
	if !strings.ContainsAny(s, "/:") || strings.ContainsAny(s, " {") {
		return false
	}
	_, err := reference.ParseNormalizedNamed(s)
	return err == nil
}

// container is one container of a rendered object.
type container struct{ where, image string }

// renderImages renders ch (hooks included) with the overrides expanded as the
// operator expands them, the variable envPlaceholder set to probe, and
// returns every container's image.
func renderImages(ch *chart.Chart, overrides []override, probe string) ([]container, error) {
	vals := map[string]any{}
	for _, o := range overrides {
		v, err := watches.ExpandOverride(o.Key, o.Value, func(n string) string {
			if n == envPlaceholder {
				return probe
			}
			return ""
		})
		if err != nil {
			return nil, fmt.Errorf("override %s: %w", o.Key, err)
		}
		if err := strvals.ParseInto(o.Key+"="+v, vals); err != nil {
			return nil, fmt.Errorf("override %s: %w", o.Key, err)
		}
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.ReleaseName = "chartkit"
	install.Namespace = "default"
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	docs := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
	}
	var out []container
	for _, d := range docs {
		split := releaseutil.SplitManifests(d)
		keys := make([]string, 0, len(split))
		for k := range split {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			var obj map[string]any
			if err := sigsyaml.Unmarshal([]byte(split[k]), &obj); err != nil || obj == nil {
				continue
			}
			name, _ := obj["metadata"].(map[string]any)["name"].(string)
			collectContainers(fmt.Sprintf("%v %s", obj["kind"], name), obj, &out)
		}
	}
	return out, nil
}

// collectContainers finds the containers of any pod template in obj.
func collectContainers(where string, v any, out *[]container) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range []string{"initContainers", "containers"} {
			list, _ := t[k].([]any)
			for _, c := range list {
				cm, _ := c.(map[string]any)
				img, _ := cm["image"].(string)
				n, _ := cm["name"].(string)
				if img != "" {
					*out = append(*out, container{where: fmt.Sprintf("%s, container %s", where, n), image: img})
				}
			}
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k != "containers" && k != "initContainers" {
				collectContainers(where, t[k], out)
			}
		}
	case []any:
		for _, e := range t {
			collectContainers(where, e, out)
		}
	}
}

// mapImages maps the images the chart's default values name to
// RELATED_IMAGE variables named after kind: the first image
// RELATED_IMAGE_<KIND>, the next RELATED_IMAGE_<KIND>_2, ... in the order of
// their values' paths. Values that name the same default image share one
// variable.
func mapImages(ch *chart.Chart, kind string) (*imageMap, error) {
	defaults, err := renderImages(ch, nil, "")
	if err != nil {
		return nil, fmt.Errorf("render with the default values: %w", err)
	}
	cands, err := candidates(ch)
	if err != nil {
		return nil, err
	}
	res := &imageMap{}
	envOf := map[string]string{} // default image -> variable
	covered := map[string]bool{} // container -> mapped
	prefix := "RELATED_IMAGE_" + envName(kind)
	for _, c := range cands {
		where, reason := probe(ch, c, defaults)
		if reason != "" {
			res.Unmapped = append(res.Unmapped, fmt.Sprintf("value %s: %s", c.path, reason))
			continue
		}
		img := ""
		for _, d := range defaults {
			if d.where == where[0] {
				img = d.image
			}
		}
		full, err := reference.ParseNormalizedNamed(img)
		if err != nil {
			res.Unmapped = append(res.Unmapped, fmt.Sprintf("value %s: the default image %q is not a valid reference", c.path, img))
			continue
		}
		img = full.String()
		env, ok := envOf[img]
		if !ok {
			env = prefix
			if n := len(res.Images); n > 0 {
				env = fmt.Sprintf("%s_%d", prefix, n+1)
			}
			envOf[img] = env
			res.Images = append(res.Images, relatedImage{Env: env, Image: img})
		}
		for _, o := range c.overrides {
			res.Overrides = append(res.Overrides, override{o.Key, strings.ReplaceAll(o.Value, envPlaceholder, env)})
		}
		for _, w := range where {
			covered[w] = true
		}
	}
	for _, d := range defaults {
		if !covered[d.where] {
			res.Unmapped = append(res.Unmapped, fmt.Sprintf("%s runs %s, which no image value of the chart maps", d.where, d.image))
		}
	}
	sort.Slice(res.Overrides, func(i, j int) bool { return res.Overrides[i].Key < res.Overrides[j].Key })
	return res, nil
}

// probe renders the chart with candidate c set to the probe references and
// returns the containers that then run exactly the probe, or why c is not
// mapped.
func probe(ch *chart.Chart, c candidate, defaults []container) ([]string, string) {
	var where []string
	for _, p := range []string{probeTag, probeDigest} {
		got, err := renderImages(ch, c.overrides, p)
		if err != nil {
			return nil, fmt.Sprintf("the chart does not render with it set: %v", firstLine(err.Error()))
		}
		var w []string
		for _, g := range got {
			if g.image == p {
				w = append(w, g.where)
			}
		}
		if len(w) == 0 {
			if p == probeDigest {
				return nil, "the chart's templates do not run an image set here by digest"
			}
			return nil, "no container runs an image set here with the default values (not rendered, or the templates build the image otherwise)"
		}
		where = w
	}
	for _, w := range where {
		found := false
		for _, d := range defaults {
			found = found || d.where == w
		}
		if !found {
			return nil, "the containers it sets are not rendered with the default values"
		}
	}
	return where, ""
}

// envName is a kind as it appears in a variable name: upper case letters and
// digits.
func envName(kind string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(kind) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
