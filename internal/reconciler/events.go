package reconciler

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/readiness"
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
	// EventReleaseAdopted: a release with no owner (made by the helm CLI or an
	// older version of the operator) became the resource's own.
	EventReleaseAdopted = "ReleaseAdopted"
	// EventUninstallSkipped: the resource was deleted without uninstalling a
	// release that is not its own.
	EventUninstallSkipped = "UninstallSkipped"
	// EventDriftCorrected: a re-apply restored objects that were changed or
	// deleted; the note names, for each changed one, the fields and who
	// changed them (their field managers).
	EventDriftCorrected = "DriftCorrected"
	// EventDriftDetected (Warning): a re-apply found drift and did not
	// correct it (watches.yaml drift.mode warn); once per new drift.
	EventDriftDetected = "DriftDetected"
	// EventReapplySkipped: a re-apply left objects of the deployed
	// revision alone: they are not the release's own (no Helm ownership
	// annotations of it), or are missing while the record is not one the
	// operator vouches for.
	EventReapplySkipped = "ReapplySkipped"
	// EventReleaseKept: the resource was deleted with
	// helmapp.io/uninstall-on-delete: "false"; its release stays.
	EventReleaseKept     = "ReleaseKept"
	EventReleaseUnlocked = "ReleaseUnlocked"
	// EventForeignRevision: a revision of the release was written by someone
	// else (the helm CLI, another process) and is upgraded back to the spec.
	EventForeignRevision = "ForeignRevision"
	// EventCRDsApplied: the chart's CRDs named were created or updated
	// before the install or upgrade (watches.yaml crds).
	EventCRDsApplied = "CRDsApplied"
	// EventAPIWarning: the API server warned on a write of the action
	// (`would violate PodSecurity ...`, a deprecated API); one event per
	// distinct warning, naming the objects it was about.
	EventAPIWarning = "APIWarning"
	// EventNondeterministicRender (Warning): before an install or upgrade
	// the chart rendered twice with the same values and chart gave
	// different templates (randAlphaNum, now); the note names them.
	EventNondeterministicRender = "NondeterministicRender"
	// EventOutOfScope (Warning): a manifest, rendered or read back from a
	// record, holds an object outside the release's scope; nothing of it
	// was applied. The note names the object (and the record).
	EventOutOfScope = status.ReasonOutOfScope
)

// maxWarningEvents bounds the APIWarning events of one action.
const maxWarningEvents = 5

// maxDriftNames bounds the objects a DriftCorrected event names.
const maxDriftNames = 5

// maxEventNote bounds an event's note; the API server refuses notes over 1 KiB.
const maxEventNote = 1000

// stepEvents emits the events of a step of the pass as the step ends, so
// that a user reads that a release was installed while its test hooks run,
// not once they ended; out is the outcome before the pass, p the pass so
// far. A failure that ends the pass has its event in failed.
func (r *Reconciler) stepEvents(obj *unstructured.Unstructured, prev status.Status, out status.Outcome, step release.Step, p *release.Pass, redactor status.Redactor) {
	switch step {
	case release.StepClaimed:
		if p.Adopted {
			r.adoptedEvent(obj, p.Before)
		}
	case release.StepForeign:
		r.foreignEvent(obj, p.Foreign, redactor)
	case release.StepRan:
		res := p.Result
		if len(p.Warned) > 0 {
			r.warningEvents(obj, res.Action, p.Warned, redactor)
		}
		r.supersededEvent(obj, p.RunErr)
		r.driftEvent(obj, obj.GetName(), res.Drifted, res.Drift)
		if d := res.Drift; d != nil && !d.Corrected && p.RunErr == nil && status.NewDrift(prev, d) {
			r.driftDetectedEvent(obj, obj.GetName(), d)
		}
		r.skippedEvent(obj, obj.GetName(), res.Skipped)
		r.crdsEvent(obj, res.Action, res.CRDsApplied)
		if len(res.Nondeterministic) > 0 {
			r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventNondeterministicRender, res.Action, "%s", status.Bound(fmt.Sprintf(
				"The chart renders differently on each run with the same values (templates %s): the revision holds one render, and the release is upgraded only when the values or the chart change",
				strings.Join(res.Nondeterministic, ", ")), maxEventNote))
		}
		if res.Unlocked != nil {
			r.unlockedEvent(obj, res.Unlocked)
		}
		if res.Succeeded {
			record(&out, p, redactor)
			r.successEvent(obj, out)
		}
	case release.StepTested:
		switch {
		case p.Test == nil:
		case p.TestSuperseded != nil:
			// Not a verdict on the chart: the newer generation runs next.
			r.supersededEvent(obj, p.TestSuperseded)
		default:
			r.testEvent(obj, *p.Test, redactor.Safe(p.TestFailure, maxEventNote))
		}
	}
}

// event emits the Warning event of a failure.
func (r *Reconciler) event(obj *unstructured.Unstructured, f *status.Failure) {
	reason := map[string]string{
		status.ActionInstall:   EventInstallFailed,
		status.ActionUpgrade:   EventUpgradeFailed,
		status.ActionUninstall: EventUninstallFailed,
	}[f.Action]
	switch {
	case f.StalledReason == status.ReasonReleaseNameConflict || f.StalledReason == status.ReasonInvalidReleaseName ||
		f.StalledReason == EventOutOfScope:
		// Not a failure of an attempt: nothing was attempted. Say what stops it.
		reason = f.StalledReason
	case reason == "":
		reason = EventReconcileFailed
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, f.Reason, "%s", status.Bound(f.Message, maxEventNote))
}

// successEvent emits the Normal event of a Helm action that succeeded, even
// when a later step of the reconcile failed; a reconcile that changed no
// release emits none.
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
	case out.ActionSucceeded && out.DeployedBy == "" && out.Action == status.ActionInstall:
		// Helm's storage could not be read back: the revision is not known.
		reason, note = EventInstallSucceeded, fmt.Sprintf("Installed release %s; reading it back from Helm's storage failed", obj.GetName())
	case out.ActionSucceeded && out.DeployedBy == "" && out.Action == status.ActionUpgrade:
		reason, note = EventUpgradeSucceeded, fmt.Sprintf("Upgraded release %s; reading it back from Helm's storage failed", obj.GetName())
	default:
		return
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, out.Action, "%s", note)
}

// adoptedEvent says that the release of the resource's name, which carried no
// owner, is now the resource's own.
func (r *Reconciler) adoptedEvent(obj *unstructured.Unstructured, st release.State) {
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventReleaseAdopted, "Adopt",
		"Adopted release %s revision %d: it is now managed by this resource and uninstalled when it is deleted",
		st.Latest.Name, st.Latest.Version)
}

// driftEvent emits the Normal event naming the objects a re-apply restored
// and, for each changed one, its fields and their writers (found); none
// when nothing drifted.
func (r *Reconciler) driftEvent(obj *unstructured.Unstructured, rel string, drifted []string, found *status.DriftFound) {
	if len(drifted) == 0 {
		return
	}
	note := fmt.Sprintf("Restored %d objects of release %s that drifted from its manifest: %s", len(drifted), rel, someNames(drifted))
	if changed := changedObjects(found, drifted); len(changed) > 0 {
		note += "; " + status.DescribeDrift(changed, maxDriftNames)
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventDriftCorrected, status.ActionReconcile, "%s",
		status.Bound(note, maxEventNote))
}

// driftDetectedEvent emits the Warning event of drift a re-apply found and
// did not correct (watches.yaml drift.mode warn): once per new drift, not
// on every re-apply that finds it again.
func (r *Reconciler) driftDetectedEvent(obj *unstructured.Unstructured, rel string, found *status.DriftFound) {
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventDriftDetected, status.ActionReconcile, "%s",
		status.Bound(fmt.Sprintf("%d objects of release %s drifted from its manifest, not corrected (drift mode warn): %s",
			len(found.Objects), rel, status.DescribeDrift(found.Objects, maxDriftNames)), maxEventNote))
}

// changedObjects are the objects of found that were changed (not deleted)
// and restored: named "Kind name (changed)" in drifted (a correction that
// failed part-way restored only some).
func changedObjects(found *status.DriftFound, drifted []string) []status.DriftedObject {
	if found == nil {
		return nil
	}
	var out []status.DriftedObject
	for _, o := range found.Objects {
		if !o.Deleted && slices.Contains(drifted, o.String()+" (changed)") {
			out = append(out, o)
		}
	}
	return out
}

// skippedEvent emits the Warning event naming the objects a re-apply left
// alone (Result.Skipped).
func (r *Reconciler) skippedEvent(obj *unstructured.Unstructured, rel string, skipped []string) {
	if len(skipped) == 0 {
		return
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventReapplySkipped, status.ActionReconcile, "%s",
		status.Bound(fmt.Sprintf("Left %d objects listed by release %s alone: %s", len(skipped), rel, someNames(skipped)), maxEventNote))
}

// someNames lists the first maxDriftNames of names and counts the rest.
func someNames(names []string) string {
	s := strings.Join(names[:min(len(names), maxDriftNames)], ", ")
	if more := len(names) - maxDriftNames; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// crdsEvent emits the Normal event naming the CRDs a run created or updated.
func (r *Reconciler) crdsEvent(obj *unstructured.Unstructured, action string, crds []string) {
	if len(crds) == 0 {
		return
	}
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventCRDsApplied, action, "%s",
		status.Bound(fmt.Sprintf("Applied %d CRDs of the chart: %s", len(crds), strings.Join(crds, ", ")), maxEventNote))
}

// warningEvents emits one APIWarning event per distinct warning the API
// server returned on the writes of the action just run (at most
// maxWarningEvents), naming the objects it was about; the warning is the
// cluster's text, redacted of the resource's values.
func (r *Reconciler) warningEvents(obj *unstructured.Unstructured, action string, warned []readiness.Warning, redactor status.Redactor) {
	var texts []string
	about := map[string][]string{}
	for _, w := range warned {
		if _, ok := about[w.Text]; !ok {
			texts = append(texts, w.Text)
		}
		if name := w.Object.String(); !slices.Contains(about[w.Text], name) {
			about[w.Text] = append(about[w.Text], name)
		}
	}
	for _, text := range texts[:min(len(texts), maxWarningEvents)] {
		objs := about[text]
		names := strings.Join(objs[:min(len(objs), maxDriftNames)], ", ")
		if more := len(objs) - maxDriftNames; more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		note := redactor.Safe(fmt.Sprintf("The API server warned on applying %s: %s", names, status.Foreign(text)), maxEventNote)
		r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventAPIWarning, action, "%s", note)
	}
}

// unlockedEvent emits the Warning event of a stale lock marked failed.
func (r *Reconciler) unlockedEvent(obj *unstructured.Unstructured, l *release.Lock) {
	r.svc.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventReleaseUnlocked, "Unlock",
		"Release %s revision %d was left %s by an operation that never finished (%s); marked failed in Helm's storage",
		obj.GetName(), l.Revision, l.Status, l.Why)
}
