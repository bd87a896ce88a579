// Package status is the status contract of every custom resource this operator
// reconciles: the condition types and reasons, the typed status, the pure
// functions that compute conditions from what a reconcile observed, and the one
// writer that patches the result onto the resource.
//
// docs/status.md describes the same contract for users; keep them together.
package status

// Condition types. kstatus reads Ready, Reconciling and Stalled; the others
// describe the Helm release in the operator's own vocabulary.
const (
	// TypeReady summarizes the others; it is derived in exactly one function, Summarize.
	TypeReady = "Ready"
	// TypeReconciling is True while the operator is working towards the desired state.
	TypeReconciling = "Reconciling"
	// TypeStalled is True when no progress is possible without a change to the resource.
	TypeStalled = "Stalled"
	// TypeInitialized is True once the resource has been taken in hand (finalizer added).
	TypeInitialized = "Initialized"
	// TypeDeployed is True while a release of the chart is deployed for the resource.
	TypeDeployed = "Deployed"
	// TypeReleaseFailed is True when the latest Helm install, upgrade or uninstall failed.
	TypeReleaseFailed = "ReleaseFailed"
	// TypeIrreconcilable is True when the operator could not reconcile the resource
	// for a reason outside a Helm install, upgrade or uninstall.
	TypeIrreconcilable = "Irreconcilable"
	// TypeResourcesReady is True when every object of the deployed release is
	// Current by kstatus' rules.
	TypeResourcesReady = "ResourcesReady"
	// TypePaused is True while the annotation helmapp.io/paused is "true";
	// absent otherwise.
	TypePaused = "Paused"
	// TypeTestSuccess is the verdict of the last run of the chart's test
	// hooks (watches.yaml test.enable); absent when tests are off.
	TypeTestSuccess = "TestSuccess"
	// TypeDrifted says whether the deployed release's objects drifted from
	// their manifest, as the last re-apply found (status.drift names the
	// paths and who changed them); absent until the first drift and after
	// a new revision is deployed. It does not change Ready.
	TypeDrifted = "Drifted"
)

// Reasons. Every condition this operator writes carries one of these; none is empty.
const (
	// Deployed, ReleaseFailed=False, Ready=True.
	ReasonInstallSuccessful   = "InstallSuccessful"
	ReasonUpgradeSuccessful   = "UpgradeSuccessful"
	ReasonUninstallSuccessful = "UninstallSuccessful"
	// ReasonRollbackSuccessful: Deployed=True with the revision that rolled a
	// failed upgrade back (upgradeRemediation: rollback).
	ReasonRollbackSuccessful = "RollbackSuccessful"
	// ReasonNotDeployed: Deployed=False because no release has been deployed yet.
	ReasonNotDeployed = "NotDeployed"
	// ReasonUninstalling: Deployed=False while an uninstall that failed part-way is retried.
	ReasonUninstalling = "Uninstalling"

	// ReleaseFailed=True.
	ReasonInstallError   = "InstallError"
	ReasonUpgradeError   = "UpgradeError"
	ReasonUninstallError = "UninstallError"
	// ReasonCRDApplyError: the API server refused to create or update one of
	// the chart's CRDs (watches.yaml crds), before the install or upgrade;
	// the message names the CRD.
	ReasonCRDApplyError = "CRDApplyError"
	// ReasonNoFailure: ReleaseFailed=False before any Helm action was attempted.
	ReasonNoFailure = "NoFailure"

	// Irreconcilable=True.
	ReasonReconcileError     = "ReconcileError"
	ReasonErrorGettingClient = "ErrorGettingClient"
	ReasonErrorGettingValues = "ErrorGettingValues"
	// ReasonValuesSourceNotFound: a Secret or ConfigMap (or its key) that
	// valuesFrom references and does not mark optional does not exist; the
	// release is retried at once when it appears.
	ReasonValuesSourceNotFound = "ValuesSourceNotFound"
	// ReasonValuesSourceInvalid: a key valuesFrom references is not a YAML
	// map (or its targetPath no --set path); the message names the key and
	// the line, never the content.
	ReasonValuesSourceInvalid      = "ValuesSourceInvalid"
	ReasonErrorGettingReleaseState = "ErrorGettingReleaseState"
	ReasonErrorAddingFinalizer     = "ErrorAddingFinalizer"
	ReasonErrorRemovingFinalizer   = "ErrorRemovingFinalizer"
	// ReasonReleaseLocked: the latest revision is locked in a pending state
	// by an operation that may still be running (another process's, or this
	// one's); it is unlocked once stale. It replaces ReleasePending.
	ReasonReleaseLocked = "ReleaseLocked"
	// ReasonReconcileSuccessful: Irreconcilable=False, the last reconcile completed.
	ReasonReconcileSuccessful = "ReconcileSuccessful"
	// ReasonNoReconcileError: Irreconcilable=False while a Helm action failed; ReleaseFailed has the verdict.
	ReasonNoReconcileError = "NoReconcileError"
	// ReasonPermissionDenied: ReleaseFailed=True (install, upgrade) or
	// Irreconcilable=True (drift re-apply), Ready=False: the identity the
	// release's objects are written as may not do what the action needs.
	// The message names each missing verb, resource and namespace. Found
	// before the action (SubjectAccessReviews of the rendered manifest: no
	// Helm action ran and no revision was stored), or from a "forbidden"
	// answer of the API server during one. Retried with the backoff, since
	// permissions can be granted at any time.
	ReasonPermissionDenied = "PermissionDenied"
	// ReasonServiceAccountNotFound: the ServiceAccount the release's objects
	// are written as (annotation helmapp.io/service-account, the watch's
	// serviceAccount or --default-service-account) does not exist. Retried,
	// since it may be created.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"

	// Stalled=True: the chart rejects the values or does not render.
	ReasonInvalidValues    = "InvalidValues"
	ReasonChartRenderError = "ChartRenderError"
	// ReasonReleaseNameConflict: Stalled=True, the release of the resource's
	// name belongs to another resource or is of another chart; nothing is done.
	ReasonReleaseNameConflict = "ReleaseNameConflict"
	// ReasonInvalidReleaseName: Stalled=True, the resource's name cannot be a
	// Helm release name (more than 53 characters).
	ReasonInvalidReleaseName = "InvalidReleaseName"
	// ReasonRetriesExhausted: Stalled=True, the watch's maxRetries consecutive
	// installs or upgrades of this generation failed; no more attempts until
	// the spec changes or the annotation helmapp.io/retry gets a new value.
	ReasonRetriesExhausted = "RetriesExhausted"
	// ReasonInvalidAnnotation: Stalled=True, an annotation the operator reads
	// has a value it cannot parse.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonServiceAccountRequired: Stalled=True, the operator runs with
	// --require-service-account and the resource names no ServiceAccount
	// (annotation helmapp.io/service-account) and its watch sets none
	// (serviceAccount, --default-service-account); nothing is done.
	ReasonServiceAccountRequired = "ServiceAccountRequired"
	// ReasonServiceAccountsDisabled: Stalled=True, the resource (annotation
	// helmapp.io/service-account) or its watch (serviceAccount) names a
	// ServiceAccount, and the operator runs without per-resource
	// ServiceAccounts (--service-accounts=off, the default, under which its
	// Role grants no impersonate); nothing is done.
	ReasonServiceAccountsDisabled = "ServiceAccountsDisabled"

	// ReasonReleaseTooLarge: ReleaseFailed=True and Stalled=True, a revision
	// of the release is too large for the one Secret Helm stores it in (the
	// API server's 1 MiB); nothing was applied. The watch field
	// `storage: chunked` stores it in several.
	ReasonReleaseTooLarge = "ReleaseTooLarge"
	// ReasonOutOfScope: Stalled=True, an object of the release (rendered,
	// or listed by a record read back from Helm's storage) lies outside
	// what the watch's scope allows: a namespaced object outside the
	// release namespace, or a cluster-scoped object the scope does not
	// list. Nothing was applied; the message names the object (kind,
	// namespace, name) and its template, or the record.
	ReasonOutOfScope = "OutOfScope"
	// ReasonReleaseRecordInvalid: Stalled=True, a Secret of the release's
	// history cannot be trusted or read within bounds (it decodes past the
	// size cap, lists too many chunks, or does not match what the operator
	// wrote); the record is not acted on and the message names the Secret.
	ReasonReleaseRecordInvalid = "ReleaseRecordInvalid"
	// ReasonNotStalled: Stalled=False.
	ReasonNotStalled = "NotStalled"

	// Initialized.
	ReasonInitialized = "Initialized"

	// ResourcesReady.
	// ReasonAllResourcesCurrent: True, every object of the release is Current.
	ReasonAllResourcesCurrent = "AllResourcesCurrent"
	// ReasonResourcesInProgress: False, objects are still on their way (or
	// being deleted, or kstatus could not judge them).
	ReasonResourcesInProgress = "InProgress"
	// ReasonResourcesFailed: False, at least one object failed.
	ReasonResourcesFailed = "Failed"
	// ReasonResourcesNotFound: False, none failed but at least one object is missing.
	ReasonResourcesNotFound = "NotFound"
	// ReasonResourcesUnreadable: Unknown, an object of the release could not
	// be read (forbidden, a timeout); the message names it and the error. The
	// reconcile fails with the same reason and is retried.
	ReasonResourcesUnreadable = "ResourceReadError"
	// ResourcesReady=False (and Ready=False) with the class of the first
	// not-ready object's cause, when the cluster states one; its message
	// then carries the cause (readiness.Cause). The generic InProgress,
	// Failed or NotFound stands when nothing more specific is known.
	//
	// ReasonFailedCreate: a workload's controller could not create its pods
	// (a Deployment's or ReplicaSet's ReplicaFailure, a StatefulSet's or
	// DaemonSet's FailedCreate event): a ResourceQuota, Pod Security, a
	// LimitRange, an admission webhook.
	ReasonFailedCreate = "FailedCreate"
	// ReasonAPIWarning: the API server warned when the operator wrote the
	// object (its Warning header on the install's or upgrade's create,
	// update or patch: `would violate PodSecurity ...`, a deprecated API);
	// kept in the operator's memory while the object is not Current.
	ReasonAPIWarning = "APIWarning"
	// ReasonUnschedulable: a pod of a workload cannot be scheduled.
	ReasonUnschedulable = "Unschedulable"
	// ReasonImagePullBackOff: a container's image cannot be pulled
	// (ImagePullBackOff, ErrImagePull, InvalidImageName); the message names the image.
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonCrashLoopBackOff: a container keeps exiting; the message gives
	// its restart count and its last termination's reason and exit code
	// (never its termination message or log).
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonContainerConfigError: a container cannot be created from its
	// configuration (CreateContainerConfigError: a missing ConfigMap,
	// Secret or key).
	ReasonContainerConfigError = "CreateContainerConfigError"
	// ReasonInitContainerFailed: an init container of a pod fails.
	ReasonInitContainerFailed = "InitContainerFailed"
	// ReasonVolumeMountFailed: a pod is stuck ContainerCreating on a volume
	// (its FailedMount or FailedAttachVolume event).
	ReasonVolumeMountFailed = "VolumeMountFailed"
	// ReasonJobFailed: a Job failed (BackoffLimitExceeded,
	// DeadlineExceeded, ...); the message names its failed pod's reason.
	ReasonJobFailed = "JobFailed"
	// ReasonNoStatusReported: a custom resource served with a status
	// subresource has reported no status yet: its controller has not acted
	// on it (it may not be installed). kstatus would call it Current.
	ReasonNoStatusReported = "NoStatusReported"
	// ReasonHealthCheckFailed: the failed expression of the watch's health
	// check (watches.yaml healthChecks) holds for the object.
	ReasonHealthCheckFailed = "HealthCheckFailed"
	// ReasonHealthCheckError: an expression of the watch's health check could
	// not be evaluated on the object (a field it reads is missing, a result
	// of the wrong type, CEL's cost limit); the message has CEL's error.
	ReasonHealthCheckError = "HealthCheckError"
	// ReasonClaimPending: a PersistentVolumeClaim is not bound; the message
	// quotes its latest Warning event (ProvisioningFailed, FailedBinding) or
	// says it waits for its first consumer.
	ReasonClaimPending = "ClaimPending"
	// ReasonRolloutStuck: a Deployment's Progressing=False
	// ProgressDeadlineExceeded, with no more specific cause known.
	ReasonRolloutStuck = "RolloutStuck"
	// ReasonAPIServiceUnavailable: an APIService (an aggregated API) is not
	// Available as the API server judges it; the message quotes the API
	// server's reason and message (MissingEndpoints, FailedDiscoveryCheck,
	// ServiceNotFound, ...). While it lasts the API's group is missing from
	// discovery for every client of the cluster.
	ReasonAPIServiceUnavailable = "APIServiceUnavailable"
	// ReasonWarningEvent: an object that is not ready, with no cause of the
	// classes above, has a Warning event; the message quotes the latest.
	ReasonWarningEvent = "WarningEvent"
	// ReasonNoReadyEndpoints: a Service with a selector has no ready
	// endpoint in its EndpointSlices, or a webhook configuration's webhook
	// points at a Service that has none (the message names the webhook and
	// its Service).
	ReasonNoReadyEndpoints = "NoReadyEndpoints"
	// ReasonWebhookServiceNotFound: a webhook configuration's webhook points
	// at a Service (clientConfig.service) that does not exist.
	ReasonWebhookServiceNotFound = "WebhookServiceNotFound"
	// ReasonCABundlePending: a webhook configuration's webhook has no
	// clientConfig.caBundle yet (an injector such as cert-manager's may
	// fill it in later).
	ReasonCABundlePending = "CABundlePending"
	// ReasonNoAddress: a LoadBalancer Service or an Ingress has no address
	// in status.loadBalancer.ingress yet. A warning (status.resources.warnings)
	// unless the watch sets requireAddresses.
	ReasonNoAddress = "NoAddress"

	// ReasonNoRelease: ResourcesReady=False (or Unknown) because no release is deployed.
	ReasonNoRelease = "NoDeployedRelease"
	// ReasonProgressDeadlineExceeded: Stalled=True, the release's objects did
	// not become ready within the watch's readinessTimeout.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

	// Reconciling and Ready while work is under way or being retried.
	ReasonProgressing = "Progressing"
	ReasonRetrying    = "Retrying"
	// ReasonDeleting: Reconciling=True (Ready=Unknown), the release is
	// uninstalled and the finalizer stays until its objects are gone
	// (watches.yaml uninstallWait).
	ReasonDeleting = "Deleting"
	// ReasonSucceeded: Reconciling=False, the resource is settled.
	ReasonSucceeded = "Succeeded"
	// ReasonStalled: Reconciling=False because the resource is stalled.
	ReasonStalled = "Stalled"

	// TestSuccess (watches.yaml test): ReasonAwaitingTests, Unknown (and
	// Reconciling=True), while the test hooks run after an install, an
	// upgrade or a new value of the annotation helmapp.io/test;
	// ReasonTestSucceeded, True, every test hook succeeded;
	// ReasonTestFailed, False, a test hook failed: the message names it and
	// Helm's error. Without test.ignoreFailures, Ready follows it.
	ReasonAwaitingTests = "AwaitingTests"
	ReasonTestSucceeded = "TestSucceeded"
	ReasonTestFailed    = "TestFailed"

	// Drifted (watches.yaml drift): ReasonDriftDetected, True, drift stands
	// uncorrected (the watch's drift mode is warn, or the correction
	// failed); ReasonDriftCorrected, False, the operator restored the
	// objects named; ReasonDriftResolved, False, drift reported before is
	// gone without the operator correcting it.
	ReasonDriftDetected  = "DriftDetected"
	ReasonDriftCorrected = "DriftCorrected"
	ReasonDriftResolved  = "DriftResolved"

	// ReasonReconcilePaused: Paused=True, the annotation helmapp.io/paused is "true".
	ReasonReconcilePaused = "ReconcilePaused"
)

// Action names recorded in failedRelease.action.
const (
	ActionInstall   = "install"
	ActionUpgrade   = "upgrade"
	ActionUninstall = "uninstall"
	ActionReconcile = "reconcile"
	// ActionRollback is the remediation of a failed upgrade (Outcome.DeployedBy only).
	ActionRollback = "rollback"
)

// OwnedConditionTypes are the condition types this operator writes. Conditions of
// other types under status.conditions belong to someone else and are kept as they are.
var OwnedConditionTypes = []string{
	TypeReady, TypeReconciling, TypeStalled, TypeInitialized,
	TypeDeployed, TypeResourcesReady, TypeReleaseFailed, TypeIrreconcilable, TypePaused, TypeTestSuccess,
	TypeChartUpgradePending, TypeDrifted,
}
