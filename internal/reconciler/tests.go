package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// Events of test runs.
const (
	// EventTestSucceeded: every test hook of the revision succeeded.
	EventTestSucceeded = "TestSucceeded"
	// EventTestFailed (Warning): a test hook failed; the note names it.
	EventTestFailed = "TestFailed"
)

// testEvent emits the event of a test run.
func (r *Reconciler) testEvent(obj *unstructured.Unstructured, run status.TestRun, failure string) {
	if failure != "" {
		r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventTestFailed, "test", "%s", status.Bound(failure, maxEventNote))
		return
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventTestSucceeded, "test",
		"The %d test hooks of revision %d succeeded", len(run.Hooks), run.Revision)
}
