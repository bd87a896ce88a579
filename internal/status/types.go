package status

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Status is the part of a resource's .status that this operator owns. Fields
// under .status that are not listed here belong to others and survive every write.
type Status struct {
	// ObservedGeneration is the metadata.generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions in the metav1.Condition shape.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// DeployedRelease is the release now deployed; nil before the first success
	// and after an uninstall.
	DeployedRelease *DeployedRelease `json:"deployedRelease,omitempty"`
	// FailedRelease is the latest failed attempt; kept after recovery for inspection.
	FailedRelease *FailedRelease `json:"failedRelease,omitempty"`
	// LastAttemptedGeneration is the generation of the latest Helm install or upgrade attempt.
	LastAttemptedGeneration int64 `json:"lastAttemptedGeneration,omitempty"`
	// Failures counts consecutive failed attempts; a success resets it to zero.
	Failures int64 `json:"failures,omitempty"`
	// LastHandledRetry is the last value of the annotation helmapp.io/retry
	// acted on: a different value asks for a fresh attempt.
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`
	// LastTestRun is the last run of the chart's test hooks, when the
	// watch's test.enable is true.
	LastTestRun *TestRun `json:"lastTestRun,omitempty"`
	// LastHandledTest is the last value of the annotation helmapp.io/test
	// acted on: a different value runs the tests again.
	LastHandledTest string `json:"lastHandledTest,omitempty"`
	// Resources is the readiness of the deployed release's objects.
	Resources *Resources `json:"resources,omitempty"`
	// Drift is the drift the last re-apply found (drift.go); nil before the
	// first and after a new revision is deployed.
	Drift *Drift `json:"drift,omitempty"`
	// ValuesSources are the Secrets and ConfigMaps the resource's valuesFrom
	// (and its watch's) reference, as the last reconcile that read them
	// found them; absent without valuesFrom.
	ValuesSources []ValuesSource `json:"valuesSources,omitempty"`
	// History is the revisions the operator made, newest first, each with
	// its causes (history.go); bounded by MaxHistoryEntries and
	// MaxHistoryBytes.
	History []HistoryEntry `json:"history,omitempty"`
	// Phase is Ready's verdict in one string for the OpenShift console's
	// Status column ("Ready", "Stalled: ReleaseNameConflict", "NotReady:
	// UpgradeError", "Progressing: Retrying"); set only by Summarize.
	Phase string `json:"phase,omitempty"`
}

// Phases: the first word of Status.Phase.
const (
	PhaseReady       = "Ready"
	PhaseStalled     = "Stalled"
	PhaseNotReady    = "NotReady"
	PhaseProgressing = "Progressing"
)

// ValuesSource is one reference of valuesFrom as it was read: its object's
// resourceVersion, and whether the object and key were found. It never holds
// the key's content.
type ValuesSource struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	ValuesKey string `json:"valuesKey"`
	// ResourceVersion is the object's, empty when it does not exist.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Found: the object exists and has the key.
	Found bool `json:"found"`
}

// Resources counts the deployed release's objects and lists those not ready.
type Resources struct {
	Total int `json:"total"`
	Ready int `json:"ready"`
	// NotReady lists at most 10 objects that are not Current, most severe first.
	NotReady []NotReadyObject `json:"notReady,omitempty"`
	// Warnings lists at most 10 objects that are not Current but do not
	// count (an address-less LoadBalancer Service or Ingress by default, an
	// object of an optional kind): reported, not counted in Total or Ready.
	Warnings []NotReadyObject `json:"warnings,omitempty"`
}

// NotReadyObject is one object of the release that is not Current.
type NotReadyObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Status is kstatus' verdict: InProgress, Failed, NotFound, Terminating or Unknown.
	Status string `json:"status"`
	// Message says why, on one line.
	Message string `json:"message,omitempty"`
}

// DeployedRelease describes a release read back from Helm's storage. It holds
// digests, never values or manifests.
type DeployedRelease struct {
	Name           string       `json:"name"`
	Namespace      string       `json:"namespace"`
	Revision       int          `json:"revision"`
	Chart          string       `json:"chart"`
	ChartVersion   string       `json:"chartVersion"`
	AppVersion     string       `json:"appVersion,omitempty"`
	Status         string       `json:"status"`
	FirstDeployed  *metav1.Time `json:"firstDeployed,omitempty"`
	LastDeployed   *metav1.Time `json:"lastDeployed,omitempty"`
	ValuesDigest   string       `json:"valuesDigest,omitempty"`
	ManifestDigest string       `json:"manifestDigest,omitempty"`
}

// FailedRelease describes the latest failed attempt.
type FailedRelease struct {
	// Revision is the revision Helm stored for the attempt; 0 (omitted) when Helm
	// stored none, e.g. when the chart did not render.
	Revision int         `json:"revision,omitempty"`
	Action   string      `json:"action"`
	Reason   string      `json:"reason"`
	Message  string      `json:"message"`
	Time     metav1.Time `json:"time"`
}

// TestRun is the last run of the chart's test hooks (watches.yaml test). It
// holds names, phases and times, never the test pods' logs.
type TestRun struct {
	// Revision is the release revision tested.
	Revision int `json:"revision,omitempty"`
	// StartedAt and CompletedAt bound the run; CompletedAt is unset while it runs.
	StartedAt   metav1.Time  `json:"startedAt"`
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Hooks are the chart's test hooks in the order Helm runs them.
	Hooks []TestHook `json:"hooks,omitempty"`
	// IgnoreFailures is the watch's test.ignoreFailures at the run: a failed
	// test then does not make the resource not Ready.
	IgnoreFailures bool `json:"ignoreFailures,omitempty"`
}

// TestHook is one test hook of a run.
type TestHook struct {
	Name string `json:"name"`
	// Phase is Helm's: Succeeded, Failed, Running, Unknown, or NotRun when
	// an earlier hook failed.
	Phase       string       `json:"phase"`
	StartedAt   *metav1.Time `json:"startedAt,omitempty"`
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// RevisionStored tells whether st ever named a revision Helm stored for the
// resource: a deployed one, or a failed attempt that Helm recorded.
func RevisionStored(st Status) bool {
	return st.DeployedRelease != nil || (st.FailedRelease != nil && st.FailedRelease.Revision > 0)
}
