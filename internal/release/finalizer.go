package release

import (
	"fmt"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/readiness"
)

// The finalizer (helmapp.io/uninstall-release) makes the operator uninstall
// a deleted resource's release before the resource goes. It is needed only
// where the garbage collector cannot do the uninstall's job: with the
// operator gone (uninstalled by OLM, its CRDs deleted) a finalizer no one
// removes leaves the resource in deletion for ever, while a resource without
// one goes at once and the garbage collector deletes, after it, every object
// that carries its owner reference.
//
// What Helm's uninstall does (helm.sh/helm/v3 v3.22 action/uninstall.go):
// it runs the pre-delete hooks, deletes the objects the latest revision's
// manifest lists (not those with helm.sh/resource-policy: keep), runs the
// post-delete hooks and deletes every record of the release. It deletes no
// hook object (a hook that outlives its run, by its delete policy, stays
// after an uninstall as well) and no CRD of the chart's crds/ directory.
//
// What the garbage collector does without the operator: the release's
// records carry the resource's owner reference (internal/storage; a chunked
// record's chunks are owned by its index), and so does each object of the
// manifest the post-renderer could make the resource's (internal/operator
// postrender.go: an object of the resource's namespace that does not ask to
// be kept); it deletes all of those once the resource is gone.
//
// So a resource needs the finalizer (NeedsFinalizer) when any of:
//   - the watch says finalizer: always (FinalizerAlways);
//   - it keeps its release on deletion (helmapp.io/uninstall-on-delete:
//     "false"): the owner references must come off first (disown.go);
//   - the watch waits for the objects to go (uninstallWait);
//   - it is paused (helmapp.io/paused): a pause changes nothing in the
//     cluster, and a deletion waits until it is lifted (docs/recovery.md);
//   - an object of a manifest Helm's uninstall would delete does not carry
//     the resource's owner reference: a cluster-scoped object, one of another
//     namespace (both get owner annotations only), or one of a revision the
//     operator did not write (the helm CLI's, adopted or foreign). A kept
//     object does not count: Helm's uninstall leaves it too;
//   - a hook of the release runs on uninstall (pre-delete, post-delete),
//     even while helm.sh/uninstall-disable-hooks is set: the annotation may
//     be gone by the time the resource is deleted. Other hooks do not count:
//     Helm's uninstall leaves them as the collector does;
//   - a record of the release's history does not carry the resource's owner
//     reference (written by the helm CLI, or before an adoption).
//
// A rendered release (an install or upgrade about to run) is judged as the
// post-renderer will make it: an object is owned when it lies in the
// resource's namespace (any object, for a cluster-scoped resource); an
// object whose kind the API server does not serve is taken as not owned.

// FinalizerPolicy is the watch's finalizer setting (watches.yaml finalizer).
type FinalizerPolicy string

const (
	// FinalizerAuto (the default) puts the finalizer only on a resource
	// that needs it (NeedsFinalizer).
	FinalizerAuto FinalizerPolicy = "auto"
	// FinalizerAlways puts it on every resource, as every earlier version
	// did: every deletion runs Helm's uninstall (and says so in the status
	// and an event), and a resource stays in deletion while the operator is
	// not running.
	FinalizerAlways FinalizerPolicy = "always"
)

// FinalizerFacts are what NeedsFinalizer judges; every part may be empty.
type FinalizerFacts struct {
	// Policy is the watch's; Keep the resource's uninstall-on-delete
	// "false"; UninstallWait the watch's.
	Policy        FinalizerPolicy
	Keep          bool
	UninstallWait bool
	// Paused is the resource's pause annotation.
	Paused bool
	// Owner is the resource's UID, Namespace its namespace ("" for a
	// cluster-scoped resource).
	Owner     types.UID
	Namespace string
	// Stored are revisions of the release as Helm stored them (the latest
	// and the deployed one): their manifests are post-rendered.
	Stored []*release.Release
	// Records are the metadata of the release's record Secrets.
	Records []metav1.Object
	// Planned is the chart as an install or upgrade is about to render
	// it, before the post-renderer; Mapper tells its kinds' scope.
	Planned *Planned
	Mapper  meta.RESTMapper
}

// Planned is a release about to be written: its manifest's objects, and
// its hooks.
type Planned struct {
	Objects []*unstructured.Unstructured
	Hooks   []*release.Hook
}

// NeedsFinalizer tells whether the resource of f needs the finalizer, and
// why, in words for its Initialized condition ("it has cluster-scoped
// objects (ClusterRole x)"); see the rule above.
func NeedsFinalizer(f FinalizerFacts) (bool, string) {
	switch {
	case f.Policy == FinalizerAlways:
		return true, "the watch sets finalizer: always"
	case f.Keep:
		return true, fmt.Sprintf("it keeps its release on deletion (%s: \"false\")", AnnotationUninstallOnDelete)
	case f.UninstallWait:
		return true, "the watch waits for its objects to go (uninstallWait)"
	case f.Paused:
		return true, "it is paused: a deletion waits until the pause is lifted"
	}
	for _, rel := range f.Stored {
		if why := f.storedNeeds(rel); why != "" {
			return true, why
		}
	}
	for _, rec := range f.Records {
		if !refersTo(rec.GetOwnerReferences(), f.Owner) {
			return true, fmt.Sprintf("the record %s of its history is not owned by it (written by the helm CLI)", rec.GetName())
		}
	}
	if f.Planned != nil {
		if why := deleteHooks(f.Planned.Hooks); why != "" {
			return true, why
		}
		for _, u := range f.Planned.Objects {
			if why := f.plannedNeeds(u); why != "" {
				return true, why
			}
		}
	}
	return false, ""
}

// storedNeeds says why the stored revision rel needs the finalizer, ""
// when it does not.
func (f FinalizerFacts) storedNeeds(rel *release.Release) string {
	if rel == nil {
		return ""
	}
	if why := deleteHooks(rel.Hooks); why != "" {
		return why
	}
	if rel.Info != nil && rel.Info.Status == release.StatusUninstalled {
		return "" // nothing of it is left for an uninstall to delete
	}
	objs, err := readiness.DecodeManifest(rel.Manifest, f.Namespace, f.Mapper)
	if err != nil {
		return fmt.Sprintf("the manifest of revision %d could not be read (%v)", rel.Version, err)
	}
	for _, u := range objs {
		if kept(u) || refersTo(u.GetOwnerReferences(), f.Owner) {
			continue
		}
		return "its object " + objectName(u) + " is not owned by it" + f.because(u)
	}
	return ""
}

// plannedNeeds says why the rendered object u, once post-rendered, needs
// the finalizer, "" when it does not.
func (f FinalizerFacts) plannedNeeds(u *unstructured.Unstructured) string {
	if kept(u) {
		return ""
	}
	gvk := u.GroupVersionKind()
	if f.Mapper == nil {
		return "" // the scope cannot be told: judged once it is stored
	}
	m, err := f.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Sprintf("the scope of its object %s %s is not known", u.GetKind(), u.GetName())
	}
	switch {
	case f.Namespace == "":
		return "" // a cluster-scoped resource owns anything
	case m.Scope.Name() == meta.RESTScopeNameRoot:
		return fmt.Sprintf("it has cluster-scoped objects (%s %s)", u.GetKind(), u.GetName())
	case u.GetNamespace() != "" && u.GetNamespace() != f.Namespace:
		return fmt.Sprintf("it has objects in other namespaces (%s %s/%s)", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	return ""
}

// because says why a stored object u carries no owner reference.
func (f FinalizerFacts) because(u *unstructured.Unstructured) string {
	switch {
	case u.GetNamespace() == "":
		return " (it is cluster-scoped)"
	case u.GetNamespace() != f.Namespace:
		return " (it is in another namespace)"
	}
	return ""
}

// deleteHooks names the first hook of hooks that Helm's uninstall runs,
// "" when none does.
func deleteHooks(hooks []*release.Hook) string {
	for _, h := range hooks {
		if h == nil {
			continue
		}
		for _, e := range h.Events {
			if e == release.HookPreDelete || e == release.HookPostDelete {
				return fmt.Sprintf("its chart has a %s hook (%s %s)", e, h.Kind, h.Name)
			}
		}
	}
	return ""
}

// kept tells whether Helm's uninstall leaves u (helm.sh/resource-policy:
// keep), as Helm reads the annotation.
func kept(u *unstructured.Unstructured) bool {
	return strings.EqualFold(strings.TrimSpace(u.GetAnnotations()[kube.ResourcePolicyAnno]), kube.KeepPolicy)
}

// refersTo tells whether refs hold a reference to uid.
func refersTo(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// FinalizerVerdict is what a pass found of the finalizer the resource
// has: still Needed, for Why, at At (the latest record's name and
// resourceVersion the pass saw, "" when it saw none), or not needed (and
// taken off).
type FinalizerVerdict struct {
	Needed  bool
	Why, At string
}

// finalizeStored puts the finalizer on the resource before the pass writes
// anything when what Helm already stores of a release that is, or is to
// become, the resource's own needs it: a revision of the helm CLI, adopted
// or foreign, whose objects and records carry no owner reference. A
// settled release read from the memo (Trimmed) was judged when it was
// written.
func (r *Runner) finalizeStored(st State) error {
	if r.Finalize == nil || st.Trimmed || st.Latest == nil {
		return nil
	}
	if c, _ := ClaimOf(st, r.Owner, r.Chart.Metadata.Name); c != ClaimOwned && c != ClaimAdoptable {
		return nil
	}
	if need, why := NeedsFinalizer(r.finalizerFacts(st)); need {
		return r.Finalize(why)
	}
	return nil
}

// finalizePlanned puts the finalizer on the resource before an install or
// upgrade writes the release rendered, when that release needs it. A chart
// that does not render here is not judged: Helm renders it again and fails
// before it writes anything.
func (r *Runner) finalizePlanned(rendered *rendering) error {
	if r.Finalize == nil || rendered == nil {
		return nil
	}
	f := FinalizerFacts{Owner: r.Owner.UID, Namespace: r.Namespace, Mapper: r.mapper(),
		Planned: &Planned{Objects: rendered.objs, Hooks: rendered.hooks}}
	if need, why := NeedsFinalizer(f); need {
		return r.Finalize(why)
	}
	return nil
}

// unfinalize, once the plan ran, judges whether the resource still needs
// the finalizer it has (Unfinalize set) from what Helm stores now (after
// the action, else before; read whole when the memo trimmed it) and takes
// it off when it does not. A release found where an earlier pass found the
// finalizer needed (KeptAt), with nothing written since, is not judged
// again. It returns nil when it judged nothing, or could not take it off.
func (r *Runner) unfinalize(before State, res Result) *FinalizerVerdict {
	if r.Unfinalize == nil {
		return nil
	}
	at := latestAt(r.records)
	if res.Observed && res.State.Latest != nil && (before.Latest == nil || res.State.Latest.Version != before.Latest.Version) {
		at = "" // the records seen are older than what the action wrote
	}
	if at != "" && at == r.KeptAt {
		return nil
	}
	st := before
	if res.Observed {
		st = res.State
	}
	if st.Trimmed {
		var err error
		if st, err = r.Observe(); err != nil {
			return nil // judged on a later pass
		}
	}
	if need, why := NeedsFinalizer(r.finalizerFacts(st)); need {
		return &FinalizerVerdict{Needed: true, Why: why, At: at}
	}
	if err := r.Unfinalize(); err != nil {
		return nil
	}
	return &FinalizerVerdict{}
}

// finalizerFacts are the facts of what st stores of the release.
func (r *Runner) finalizerFacts(st State) FinalizerFacts {
	return FinalizerFacts{Owner: r.Owner.UID, Namespace: r.Namespace, Mapper: r.mapper(),
		Stored: []*release.Release{st.Latest, st.Deployed}, Records: r.records}
}

// mapper is the REST mapper of the release's kube client, nil without one.
func (r *Runner) mapper() meta.RESTMapper {
	if r.Shared == nil || r.Services == nil || r.Kube == nil {
		return nil
	}
	return r.Kube.RESTMapper()
}

// latestAt names the latest of records by its name and resourceVersion,
// "" for none.
func latestAt(records []metav1.Object) string {
	at, version := "", 0
	for _, rec := range records {
		if v, err := strconv.Atoi(rec.GetLabels()["version"]); err == nil && v > version {
			at, version = rec.GetName()+"@"+rec.GetResourceVersion(), v
		}
	}
	return at
}
