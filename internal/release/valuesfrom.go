package release

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// DefaultValuesKey is the key of a referenced Secret or ConfigMap read when
// a reference names none (Flux's default).
const DefaultValuesKey = "values.yaml"

// ValuesReference is one entry of a resource's valuesFrom (or of its
// watch's, which come first): the key of a Secret or ConfigMap of the
// resource's namespace whose content is merged into the release's values.
type ValuesReference struct {
	// Kind is "Secret" or "ConfigMap".
	Kind string `json:"kind"`
	Name string `json:"name"`
	// ValuesKey is the key read; DefaultValuesKey when empty.
	ValuesKey string `json:"valuesKey,omitempty"`
	// TargetPath, when set, is the --set-style path the key's whole
	// content is set at (as one value); otherwise the content is YAML,
	// deep-merged.
	TargetPath string `json:"targetPath,omitempty"`
	// Optional: a missing object or key is skipped instead of failing.
	Optional bool `json:"optional,omitempty"`
	// Literal, with TargetPath, sets the content as a string, verbatim
	// (helm --set-literal; Flux's literal, helm-controller v1.6.0): never
	// typed as a number, boolean or null. Without TargetPath it changes
	// nothing, as in Flux.
	Literal bool `json:"literal,omitempty"`
}

// Key is how the reference's object is named in messages and the index:
// "Secret/db-credentials".
func (r ValuesReference) Key() string { return r.Kind + "/" + r.Name }

// Described names the reference's object and key: "Secret db-credentials,
// key values.yaml".
func (r ValuesReference) Described() string {
	return fmt.Sprintf("%s %s, key %s", r.Kind, r.Name, r.ValuesKey)
}

// ValuesReferences returns the watch's references (defaults) followed by
// the resource's own (obj's top-level valuesFrom), each with its ValuesKey
// defaulted; nil when there is none. A malformed entry (which the CRD's
// schema refuses) is an ErrorGettingValues failure.
func ValuesReferences(obj *unstructured.Unstructured, defaults []ValuesReference) ([]ValuesReference, error) {
	raw, found, err := unstructured.NestedSlice(obj.Object, "valuesFrom")
	if err != nil {
		return nil, &Error{Reason: status.ReasonErrorGettingValues, Summary: "Reading valuesFrom", Err: err}
	}
	if !found && len(defaults) == 0 {
		return nil, nil
	}
	refs := append([]ValuesReference(nil), defaults...)
	for i, item := range raw {
		m, ok := item.(map[string]any)
		var ref ValuesReference
		if ok {
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ref)
		}
		if !ok || err != nil || (ref.Kind != "Secret" && ref.Kind != "ConfigMap") || ref.Name == "" {
			return nil, &Error{Reason: status.ReasonErrorGettingValues,
				Summary: fmt.Sprintf("valuesFrom[%d] needs a kind (Secret or ConfigMap) and a name", i)}
		}
		refs = append(refs, ref)
	}
	for i := range refs {
		if refs[i].ValuesKey == "" {
			refs[i].ValuesKey = DefaultValuesKey
		}
	}
	return refs, nil
}

// ValuesSource is one reference as it was read: Found tells whether its
// object and key exist; ResourceVersion is the object's (empty when it does
// not exist); Content is the key's content. A Source's content never
// reaches a status, an event or a log.
type ValuesSource struct {
	Ref             ValuesReference
	Found           bool
	ResourceVersion string
	Content         string
}

// ReviewValuesSources asks reviewer, with the access review the permission
// preflight makes for the chart's objects (preflight.go), whether id may get
// each referenced object of namespace, before any is read: a denial is
// PermissionDenied naming every object id may not get ("ServiceAccount
// team-a/deployer may not: get configmaps/defaults, get secrets/db (in
// team-a)"), Refused and retried as ReadValuesSources' is. Nil when all are
// granted, with no reviewer, or when the review itself fails (the reads
// then find out).
func ReviewValuesSources(ctx context.Context, reviewer Reviewer, id Identity, namespace string, refs []ValuesReference) error {
	if reviewer == nil || len(refs) == 0 {
		return nil
	}
	perms := make([]Permission, len(refs))
	for i, ref := range refs {
		perms[i] = Permission{Verb: "get", Resource: strings.ToLower(ref.Kind) + "s", Namespace: namespace, Name: ref.Name}
	}
	perms = uniquePermissions(perms)
	allowed, err := reviewer.Review(ctx, id, perms)
	if err != nil || len(allowed) != len(perms) {
		return nil
	}
	var denied []Permission
	for i, ok := range allowed {
		if !ok {
			denied = append(denied, perms[i])
		}
	}
	if len(denied) == 0 {
		return nil
	}
	return &Error{Reason: status.ReasonPermissionDenied, Refused: true,
		Summary: DeniedMessage(id, denied) + ", which valuesFrom references; grant it, and the release is retried"}
}

// ReadValuesSources reads each reference's object of namespace with a
// direct GET through reader (acting as the resource's identity; never a
// cache, so that no Secret's data is kept), and returns what it read of
// each. A missing object or key that is not optional is a
// ValuesSourceNotFound failure naming kind, name and key (the sources are
// still all returned, for the status); a read the identity may not make is
// PermissionDenied naming "get secrets/<name>"; both are Refused (nothing
// ran) and retried at once when the object appears or a grant is made
// (package reconciler).
func ReadValuesSources(ctx context.Context, reader client.Reader, id Identity, namespace string, refs []ValuesReference) ([]ValuesSource, error) {
	out := make([]ValuesSource, 0, len(refs))
	var missing error
	for _, ref := range refs {
		src := ValuesSource{Ref: ref}
		data, rv, err := readKey(ctx, reader, namespace, ref)
		switch {
		case apierrors.IsForbidden(err):
			res := strings.ToLower(ref.Kind) + "s/" + ref.Name
			return out, &Error{Reason: status.ReasonPermissionDenied, Refused: true,
				Summary: fmt.Sprintf("%s may not: get %s (in %s), which valuesFrom references; grant it, and the release is retried", id, res, namespace)}
		case apierrors.IsNotFound(err):
		case err != nil:
			return out, &Error{Reason: status.ReasonErrorGettingValues,
				Summary: fmt.Sprintf("Reading %s of valuesFrom failed", ref.Key()), Err: err}
		}
		src.ResourceVersion = rv
		content, ok := data[ref.ValuesKey]
		src.Found, src.Content = ok, content
		if !ok && !ref.Optional && missing == nil {
			what := "does not exist"
			if rv != "" {
				what = "has no key " + ref.ValuesKey
			}
			missing = &Error{Reason: status.ReasonValuesSourceNotFound, Refused: true,
				Summary: fmt.Sprintf("%s of valuesFrom %s; create it, or mark the reference optional", refName(ref), what)}
		}
		out = append(out, src)
	}
	return out, missing
}

// refName names the reference's object and key in a message.
func refName(ref ValuesReference) string {
	return fmt.Sprintf("%s %s (key %s)", ref.Kind, ref.Name, ref.ValuesKey)
}

// readKey reads ref's object: its keys' contents and its resourceVersion.
func readKey(ctx context.Context, reader client.Reader, namespace string, ref ValuesReference) (map[string]string, string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	if ref.Kind == "Secret" {
		s := &corev1.Secret{}
		if err := reader.Get(ctx, key, s); err != nil {
			return nil, "", err
		}
		data := make(map[string]string, len(s.Data)+len(s.StringData))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, s.ResourceVersion, nil
	}
	cm := &corev1.ConfigMap{}
	if err := reader.Get(ctx, key, cm); err != nil {
		return nil, "", err
	}
	data := make(map[string]string, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		data[k] = string(v)
	}
	for k, v := range cm.Data {
		data[k] = v
	}
	return data, cm.ResourceVersion, nil
}

// yamlLine finds the line number a YAML parser's error names.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// MergeValues returns the values of obj's release: its spec, then the
// sources deep-merged over it in order (a key's YAML, or its content set at
// its targetPath), then the watch's override values (expanded from the
// environment) set on top. This is not Flux's order (valuesFrom, then
// spec.values) on purpose: our spec is the chart's values with the chart's
// defaults written into the CRD, so the API server fills every defaulted key
// into spec, and under Flux's order a Secret could never set a key the chart
// defaults (a `password: ""`), which is what valuesFrom is for. A key that
// is not YAML is a ValuesSourceInvalid failure naming the key and the line,
// never the content.
func MergeValues(obj *unstructured.Unstructured, sources []ValuesSource, overrides map[string]string) (map[string]any, error) {
	if len(sources) == 0 {
		return Values(obj, overrides)
	}
	vals, err := Values(obj, nil)
	if err != nil {
		return nil, err
	}
	for _, src := range sources {
		if !src.Found {
			continue
		}
		if src.Ref.TargetPath != "" {
			// One value at a path, as Flux sets it: the content a string,
			// typed by --set's rules only where it is true, false, null or
			// a number.
			parse := strvals.ParseInto
			if src.Ref.Literal {
				parse = strvals.ParseIntoString
			}
			if err := parse(src.Ref.TargetPath+"="+escapeSet(src.Content), vals); err != nil {
				return nil, &Error{Reason: status.ReasonValuesSourceInvalid,
					Summary: fmt.Sprintf("The targetPath %q of %s is not a valid --set path", src.Ref.TargetPath, refName(src.Ref))}
			}
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(src.Content), &m); err != nil {
			where := ""
			if l := yamlLine.FindStringSubmatch(err.Error()); l != nil {
				where = " at line " + l[1]
			}
			return nil, &Error{Reason: status.ReasonValuesSourceInvalid,
				Summary: fmt.Sprintf("%s of valuesFrom is not a YAML map%s; correct the key", refName(src.Ref), where)}
		}
		vals = deepMerge(vals, runtime.DeepCopyJSON(m))
	}
	// The overrides last, as Values sets them.
	withOverrides := &unstructured.Unstructured{Object: map[string]any{"spec": vals}}
	return Values(withOverrides, overrides)
}

// escapeSet escapes what --set's parser reads as syntax in a value.
func escapeSet(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`)
	return r.Replace(s)
}

// SecretValues are the values that came from Secrets: the contents of
// their keys and, for YAML keys, each of their leaves, for the redactor.
func SecretValues(sources []ValuesSource) map[string]any {
	out := map[string]any{}
	for i, src := range sources {
		if !src.Found || src.Ref.Kind != "Secret" {
			continue
		}
		k := fmt.Sprintf("valuesFrom:%d", i)
		out[k+":content"] = src.Content
		var m map[string]any
		if src.Ref.TargetPath == "" && yaml.Unmarshal([]byte(src.Content), &m) == nil {
			out[k] = m
		}
	}
	return out
}

// deepMerge merges src over dst (src wins; maps merge key by key) and
// returns dst. Helm's MergeTables is not used: it keeps dst's values and
// logs to the process' standard logger.
func deepMerge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			dst[k] = deepMerge(dm, sm)
			continue
		}
		dst[k] = v
	}
	return dst
}
