package release

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// A release's scope is where its objects may be: every namespaced object in
// the release's own namespace (a manifest that names none means that one),
// and anything else — a cluster-scoped object, a namespaced one elsewhere —
// only when the watch's scope (watches.yaml) lists its kind and its name.
// It is one check (Scope.Strays) that every manifest passes before anything
// of it is applied, read or deleted: the manifest the chart renders, in the
// post-renderer of every install and upgrade (internal/operator) and, hooks
// included, before the action runs (deploy.go); and the manifest and hooks
// of every record read back from Helm's storage before the pass acts on it
// (pass.go), before a rollback (rollback.go), an uninstall or a kept
// release's disowning (deletion.go). A chart that interpolates a value
// unquoted can be made to render an extra document, in any namespace: the
// check is what keeps that document from being applied, whatever the chart
// (docs/tenancy.md, "A boundary that holds without lockdown").

// Scope is what the releases of a kind may hold besides the namespaced
// objects of their own namespace (watches.yaml scope). The zero Scope
// allows nothing more.
type Scope struct {
	// ClusterScoped lists the cluster-scoped objects a release may hold.
	ClusterScoped []ScopeRule
	// Namespaced lists the namespaced objects a release may hold in
	// namespaces other than its own.
	Namespaced []ScopeRule
}

// ScopeRule allows the objects of one kind whose name matches one of Names
// and, for a namespaced kind, whose namespace is one of Namespaces.
type ScopeRule struct {
	// Group and Kind name the kind ("" is the core group).
	Group, Kind string
	// Namespaces are the other namespaces allowed (Scope.Namespaced only).
	Namespaces []string
	// Names are name patterns: "*" matches any run of characters, and
	// NameRelease and NameNamespace stand for the release's name and
	// namespace ("{{release}}-*").
	Names []string
}

// The placeholders of a ScopeRule's name patterns.
const (
	NameRelease   = "{{release}}"
	NameNamespace = "{{namespace}}"
)

// ScopedObject is one object of a manifest as the scope check sees it.
type ScopedObject struct {
	readiness.ObjectRef
	// ClusterScoped tells the object has no namespace (Ref.Namespace is "").
	ClusterScoped bool
	// Source is the template the object was rendered from
	// ("nginx/templates/ingress.yaml"), "" when the manifest does not say.
	Source string
}

// String names the object and its template: "ConfigMap team-b/x (from
// nginx/templates/ingress.yaml)", "ClusterRole x (cluster-scoped)".
func (o ScopedObject) String() string {
	var notes []string
	if o.ClusterScoped {
		notes = append(notes, "cluster-scoped")
	}
	if o.Source != "" {
		notes = append(notes, "from "+o.Source)
	}
	if len(notes) == 0 {
		return o.ObjectRef.String()
	}
	return o.ObjectRef.String() + " (" + strings.Join(notes, ", ") + ")"
}

// Strays returns the objects of objs that release name of namespace ns may
// not hold, in their order; none when every one is in scope.
func (s Scope) Strays(objs []ScopedObject, name, ns string) []ScopedObject {
	var out []ScopedObject
	for _, o := range objs {
		if !s.allows(o, name, ns) {
			out = append(out, o)
		}
	}
	return out
}

// allows tells whether release name of namespace ns may hold o.
func (s Scope) allows(o ScopedObject, name, ns string) bool {
	rules := s.ClusterScoped
	if !o.ClusterScoped {
		if o.Namespace == "" || o.Namespace == ns {
			return true
		}
		rules = s.Namespaced
	}
	gk := o.GroupVersionKind().GroupKind()
	for _, r := range rules {
		if (schema.GroupKind{Group: r.Group, Kind: r.Kind}) != gk {
			continue
		}
		if !o.ClusterScoped && !contains(r.Namespaces, o.Namespace) {
			continue
		}
		for _, p := range r.Names {
			if MatchName(p, o.Name, name, ns) {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MatchName tells whether name matches pattern for release release of
// namespace ns: the placeholders are replaced by the release's name and
// namespace, and "*" matches any run of characters (none included).
func MatchName(pattern, name, release, ns string) bool {
	p := strings.ReplaceAll(strings.ReplaceAll(pattern, NameRelease, release), NameNamespace, ns)
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, mid)
		if i < 0 {
			return false
		}
		rest = rest[i+len(mid):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}

// ManifestObjects decodes a Helm manifest (YAML documents, each after the
// "# Source: <template>" comment Helm writes before it) with the one
// manifest decoder, readiness.DecodeManifest, document by document so that
// each object keeps the template it came from. Namespaced objects that name
// no namespace are in ns; mapper tells cluster-scoped kinds (a kind it
// cannot map is taken as namespaced, as DecodeManifest does: Helm cannot
// apply a kind the API server does not serve either).
func ManifestObjects(manifest, ns string, mapper meta.RESTMapper) ([]ScopedObject, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var out []ScopedObject
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the manifest: %w", err)
		}
		objs, err := DocumentObjects(string(raw), sourceOf(raw), ns, mapper)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
}

// DocumentObjects decodes the objects of manifest (one template's
// documents, a hook's), all from the template source.
func DocumentObjects(manifest, source, ns string, mapper meta.RESTMapper) ([]ScopedObject, error) {
	objs, err := readiness.DecodeManifest(manifest, ns, mapper)
	if err != nil {
		if source != "" {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return nil, err
	}
	out := make([]ScopedObject, 0, len(objs))
	for _, u := range objs {
		out = append(out, scopedObject(u, source))
	}
	return out, nil
}

// scopedObject is u, decoded by readiness.DecodeManifest (which leaves a
// cluster-scoped object, and only one, without a namespace), from source.
func scopedObject(u *unstructured.Unstructured, source string) ScopedObject {
	return ScopedObject{
		ObjectRef:     readiness.ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()},
		ClusterScoped: u.GetNamespace() == "",
		Source:        source,
	}
}

// sourceOf is the template Helm names in a document's "# Source:" comment,
// "" when it names none.
func sourceOf(raw []byte) string {
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if src, ok := strings.CutPrefix(line, "# Source: "); ok {
			return strings.TrimSpace(src)
		}
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return "" // the comment comes before the object, never inside it
		}
	}
	return ""
}

// ReleaseObjects are the objects of a revision as Helm stored it: its
// manifest's and its hooks' (each hook from its template). Objects that
// name no namespace are in ns, the namespace Helm's actions apply them to
// (the release's, whatever the record says).
func ReleaseObjects(rel *helmrelease.Release, ns string, mapper meta.RESTMapper) ([]ScopedObject, error) {
	objs, err := ManifestObjects(rel.Manifest, ns, mapper)
	if err != nil {
		return nil, err
	}
	for _, h := range rel.Hooks {
		if h == nil {
			continue
		}
		hobjs, err := DocumentObjects(h.Manifest, h.Path, ns, mapper)
		if err != nil {
			return nil, err
		}
		objs = append(objs, hobjs...)
	}
	return objs, nil
}

// outOfScope is the failure of a manifest that holds objects outside its
// release's scope (strays): an *Error with reason OutOfScope, stalled (the
// same manifest gives the same verdict), refused (nothing was applied). act
// is the action refused (status.ActionInstall, ...), what the manifest's
// origin, which the message begins with.
func outOfScope(act, what, ns string, strays []ScopedObject) *Error {
	names := make([]string, len(strays))
	for i, o := range strays {
		names[i] = o.String()
	}
	verb, pronoun := "is", "it"
	if len(strays) > 1 {
		verb, pronoun = "are", "them"
	}
	return &Error{Reason: status.ReasonOutOfScope, StalledReason: status.ReasonOutOfScope, Action: act, Refused: true,
		Summary: fmt.Sprintf("%s: %s %s outside the release namespace %s; the watch's scope does not allow %s",
			what, strings.Join(names, ", "), verb, ns, pronoun)}
}

// RenderedOutOfScope is the failure of an install or upgrade (act) of
// release name whose rendered manifest or hooks hold strays: nothing was
// applied, and Helm's history is as it was.
func RenderedOutOfScope(act, name, ns string, strays []ScopedObject) *Error {
	e := outOfScope(act, fmt.Sprintf("The %s of release %s was refused", act, name), ns, strays)
	e.Summary += "; nothing was applied"
	return e
}

// StraysError is the post-renderer's refusal of a rendered manifest that
// holds objects outside its release's scope; Helm stops the install or
// upgrade before it stores or applies anything, and deploy turns it into
// the action's OutOfScope failure (RenderedOutOfScope).
type StraysError struct {
	// Strays are the objects out of scope; Namespace the release's.
	Strays    []ScopedObject
	Namespace string
}

func (e *StraysError) Error() string {
	return outOfScope("", "the post-renderer refused the manifest", e.Namespace, e.Strays).Summary
}

// IsOutOfScope tells whether err is an OutOfScope failure.
func IsOutOfScope(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == status.ReasonOutOfScope
}

// RecordKey is the name of the Secret that stores revision version of
// release name (Helm's storage key; the chunked driver's index Secret).
func RecordKey(name string, version int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version)
}

// RecordsInScope checks the records of st the operator may act on — its
// latest and its deployed revision, their manifests and hooks — against the
// watch's scope, before anything of them is read, patched, deleted or run.
// A record that lists an object outside the scope was not written by this
// operator under this scope (the post-renderer refuses such a manifest):
// someone rewrote it, or the watch's scope was narrowed since. It is not
// acted on: the failure is OutOfScope, stalled, and names the record and
// the object.
func (r *Runner) RecordsInScope(st State) error {
	var mapper meta.RESTMapper
	if r.Kube != nil {
		mapper = r.Kube.RESTMapper()
	}
	for i, rel := range []*helmrelease.Release{st.Latest, st.Deployed} {
		if rel == nil || (i == 1 && rel == st.Latest) {
			continue
		}
		if err := r.recordInScope(rel, mapper); err != nil {
			return err
		}
	}
	return nil
}

// recordInScope checks one record (see RecordsInScope).
func (r *Runner) recordInScope(rel *helmrelease.Release, mapper meta.RESTMapper) error {
	objs, err := ReleaseObjects(rel, r.Namespace, mapper)
	if err != nil {
		// Not decodable, so not acted on by the operator's own code; Helm's
		// actions fail on it with their own error.
		return nil
	}
	strays := r.Scope.Strays(objs, r.Name, r.Namespace)
	if len(strays) == 0 {
		return nil
	}
	what := fmt.Sprintf("The record of release %s revision %d (Secret %s)", r.Name, rel.Version, RecordKey(r.Name, rel.Version))
	e := outOfScope("", what, r.Namespace, strays)
	e.Refused = false
	e.Summary += "; the record does not match what the operator wrote (someone rewrote it, or the watch's scope was narrowed since) and is not acted on: delete or restore it"
	return e
}
