package reconciler

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// Event reasons of the status contract.
const (
	EventInstallSucceeded   = "InstallSucceeded"
	EventUpgradeSucceeded   = "UpgradeSucceeded"
	EventUninstallSucceeded = "UninstallSucceeded"
	EventInstallFailed      = "InstallFailed"
	EventUpgradeFailed      = "UpgradeFailed"
	EventUninstallFailed    = "UninstallFailed"
	EventReconcileFailed    = "ReconcileFailed"
	EventReleaseUnlocked    = "ReleaseUnlocked"
)

// maxEventNote bounds an event's note; the API server refuses notes over 1 KiB.
const maxEventNote = 1000

// event emits the Warning event of a failure.
func (r *Reconciler) event(obj *unstructured.Unstructured, f *status.Failure) {
	reason := map[string]string{
		status.ActionInstall:   EventInstallFailed,
		status.ActionUpgrade:   EventUpgradeFailed,
		status.ActionUninstall: EventUninstallFailed,
	}[f.Action]
	if reason == "" {
		reason = EventReconcileFailed
	}
	r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, f.Reason, "%s", status.Bound(f.Message, maxEventNote))
}

// successEvent emits the Normal event of a Helm action that succeeded; a
// reconcile that changed no release emits none.
func (r *Reconciler) successEvent(obj *unstructured.Unstructured, out status.Outcome) {
	var reason, note string
	d := out.Deployed
	switch {
	case out.Uninstalled:
		reason, note = EventUninstallSucceeded, fmt.Sprintf("Uninstalled release %s", obj.GetName())
	case out.DeployedBy == status.ActionInstall && d != nil:
		reason, note = EventInstallSucceeded, fmt.Sprintf("Installed release %s revision %d of chart %s %s", d.Name, d.Revision, d.Chart, d.ChartVersion)
	case out.DeployedBy == status.ActionUpgrade && d != nil:
		reason, note = EventUpgradeSucceeded, fmt.Sprintf("Upgraded release %s to revision %d of chart %s %s", d.Name, d.Revision, d.Chart, d.ChartVersion)
	default:
		return
	}
	r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, out.Action, "%s", note)
}

// unlockedEvent emits the Warning event of a stale lock marked failed.
func (r *Reconciler) unlockedEvent(obj *unstructured.Unstructured, l *release.Lock) {
	r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventReleaseUnlocked, "Unlock",
		"Release %s revision %d was left %s by an operation that never finished (%s); marked failed in Helm's storage",
		obj.GetName(), l.Revision, l.Status, l.Why)
}
