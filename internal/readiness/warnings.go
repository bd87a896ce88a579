package readiness

import (
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Bounds of what Warnings keeps of one owner: the objects warned about, the
// warnings of one object's latest write, the length of one warning, and
// the warnings not yet taken for the action's events.
const (
	maxWarnedObjects  = 50
	maxObjectWarnings = 3
	maxWarningLength  = 500
	// apiServerCutRunes is the length, in runes, to which the API server
	// cuts each warning of a response whose warnings pass 4 Ki runes.
	apiServerCutRunes   = 256
	maxFreshWarnings    = 20
	apiWarningSeparator = "; "
)

// WarnedObject names an object the API server warned about when it was
// written: its group, kind, namespace (empty when cluster-scoped) and name
// (empty when the write did not say it).
type WarnedObject struct {
	Group, Kind, Namespace, Name string
}

// String is "Kind name", as the status names objects.
func (o WarnedObject) String() string {
	if o.Name == "" {
		return o.Kind
	}
	return o.Kind + " " + o.Name
}

// Warning is one warning of the API server on a write of an object.
type Warning struct {
	Object WarnedObject
	Text   string
}

// Warnings keeps, per owner (a watched resource, by UID), the warnings the
// API server returned on the latest write of each object of its release
// (its `Warning:` headers: `would violate PodSecurity ...`, a deprecated
// API): the cause of an object that is not Current (causeOf), until the
// object is Current, is written again without a warning, or leaves the
// release. It also keeps the warnings recorded since they were last taken,
// for the events of the action that wrote them (Take). In process memory
// only: a restarted operator knows none until the next write. Bounded per
// owner; safe for concurrent use. A nil *Warnings keeps nothing.
type Warnings struct {
	mu     sync.Mutex
	owners map[types.UID]*ownerWarnings
}

type ownerWarnings struct {
	objects map[WarnedObject][]string
	fresh   []Warning
}

// NewWarnings returns an empty store.
func NewWarnings() *Warnings { return &Warnings{owners: map[types.UID]*ownerWarnings{}} }

// Record sets the warnings of the latest write of obj, made for owner:
// texts (bounded), or none when texts is empty.
func (w *Warnings) Record(owner types.UID, obj WarnedObject, texts []string) {
	if w == nil || owner == "" {
		return
	}
	var kept []string
	for _, t := range texts {
		// Kept not yet redacted (the resource's values are not known
		// here): cut only with a mark that makes redaction hide a value
		// cut through at the end (status.Clip); redacted, then shortened,
		// when it is shown.
		cutByServer := utf8.RuneCountInString(strings.TrimSpace(t)) == apiServerCutRunes
		t = status.Clip(oneLine(t), maxWarningLength)
		if cutByServer && t != "" {
			t = status.Clipped(t)
		}
		if t != "" && !slices.Contains(kept, t) && len(kept) < maxObjectWarnings {
			kept = append(kept, t)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.owners[owner]
	if len(kept) == 0 {
		if o != nil {
			delete(o.objects, obj)
		}
		return
	}
	if o == nil {
		o = &ownerWarnings{objects: map[WarnedObject][]string{}}
		w.owners[owner] = o
	}
	if _, ok := o.objects[obj]; ok || len(o.objects) < maxWarnedObjects {
		o.objects[obj] = kept
	}
	for _, t := range kept {
		wa := Warning{Object: obj, Text: t}
		if len(o.fresh) < maxFreshWarnings && !slices.Contains(o.fresh, wa) {
			o.fresh = append(o.fresh, wa)
		}
	}
}

// Has tells whether any object of owner has warnings kept: a write without
// warnings matters only then (it clears its object's).
func (w *Warnings) Has(owner types.UID) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.owners[owner]
	return o != nil && len(o.objects) > 0
}

// Take returns the warnings recorded for owner since the last Take, in the
// order they came, and forgets them (the objects' warnings stay).
func (w *Warnings) Take(owner types.UID) []Warning {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.owners[owner]
	if o == nil {
		return nil
	}
	fresh := o.fresh
	o.fresh = nil
	return fresh
}

// Of returns the warnings kept for the object ref of owner's release.
func (w *Warnings) Of(owner types.UID, ref ObjectRef) []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if o := w.owners[owner]; o != nil {
		return slices.Clone(o.objects[warnedRef(ref)])
	}
	return nil
}

// Retain forgets the warnings of the objects of owner that are not in refs
// (hooks, objects no longer in the release).
func (w *Warnings) Retain(owner types.UID, refs []ObjectRef) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.owners[owner]
	if o == nil {
		return
	}
	in := make(map[WarnedObject]bool, len(refs))
	for _, r := range refs {
		in[warnedRef(r)] = true
	}
	for obj := range o.objects {
		if !in[obj] {
			delete(o.objects, obj)
		}
	}
}

// forget drops the warnings of ref (it is Current).
func (w *Warnings) forget(owner types.UID, ref ObjectRef) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if o := w.owners[owner]; o != nil {
		delete(o.objects, warnedRef(ref))
	}
}

// Forget drops everything kept for owner (it is gone).
func (w *Warnings) Forget(owner types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	delete(w.owners, owner)
	w.mu.Unlock()
}

func warnedRef(r ObjectRef) WarnedObject {
	gvk := r.GroupVersionKind()
	return WarnedObject{Group: gvk.Group, Kind: gvk.Kind, Namespace: r.Namespace, Name: r.Name}
}

// warningCause is the cause the API server's warnings on an object's latest
// write state, the warnings marked foreign.
func warningCause(texts []string) Cause {
	if len(texts) == 0 {
		return Cause{}
	}
	msg := "API server warning on apply: "
	for i, t := range texts {
		if i > 0 {
			msg += apiWarningSeparator
		}
		msg += status.Foreign(t)
	}
	return Cause{Reason: status.ReasonAPIWarning, Message: msg}
}
