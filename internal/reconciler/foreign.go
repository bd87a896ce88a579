package reconciler

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// A revision someone else wrote (release.Foreign) is reported once, named by
// the status while the upgrade back to the spec runs, and undone.

// foreignReports remembers, per resource, the newest foreign revision
// reported, so that each is reported once.
type foreignReports struct {
	mu       sync.Mutex
	reported map[types.UID]int
}

// foreignEvent tells whether f, the verdict on the latest revision, is a
// revision someone else wrote that the resource must undo, and emits the
// Warning event that says so, once per revision. Helm's description is not
// the operator's text: it is redacted.
func (r *Reconciler) foreignEvent(obj *unstructured.Unstructured, f *release.Foreign, redactor status.Redactor) bool {
	if f == nil || f.Same {
		return false
	}
	r.foreign.mu.Lock()
	defer r.foreign.mu.Unlock()
	if r.foreign.reported == nil {
		r.foreign.reported = map[types.UID]int{}
	}
	if r.foreign.reported[obj.GetUID()] >= f.Revision {
		return true
	}
	r.foreign.reported[obj.GetUID()] = f.Revision
	desc := ""
	if f.Description != "" {
		desc = fmt.Sprintf(", Helm's description %q", redactor.Redact(f.Description))
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventForeignRevision, status.ActionUpgrade, "%s",
		status.Bound(fmt.Sprintf("Release %s revision %d (%s%s) was written by someone else, not this operator; upgrading it back to the resource's spec",
			obj.GetName(), f.Revision, f.Status, desc), maxEventNote))
	return true
}

// forget forgets a resource that is gone.
func (f *foreignReports) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.reported, uid)
}

// undoing is the progress status of the upgrade that undoes foreign: it
// names the foreign revision, which Helm has deployed until the upgrade
// ends, and says what is under way.
func undoing(progress status.Status, msg string, foreign *release.Foreign, deployed *status.DeployedRelease) status.Status {
	progress.DeployedRelease = deployed
	if c := meta.FindStatusCondition(progress.Conditions, status.TypeReconciling); c != nil {
		c.Message = status.Bound(fmt.Sprintf("%s, back to the resource's spec: revision %d was written by someone else", msg, foreign.Revision), status.MaxMessageLength)
	}
	return progress
}

// knownRevision is the newest revision the status names: deployed or failed.
func knownRevision(s status.Status) int {
	k := 0
	if s.DeployedRelease != nil {
		k = s.DeployedRelease.Revision
	}
	if s.FailedRelease != nil {
		k = max(k, s.FailedRelease.Revision)
	}
	return k
}
