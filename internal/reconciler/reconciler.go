// Package reconciler holds the controller-runtime Reconcile of one watched
// kind: fetch, finalizer, delete branch and the one deferred status write. It
// hands everything Helm-specific to the release package and everything
// about conditions to the status package.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/rollout"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// Finalizer is put on a resource whose release must be uninstalled before
// the resource goes away, where the garbage collector cannot do the
// uninstall's job (release.NeedsFinalizer; finalizer.go).
const Finalizer = "helmapp.io/uninstall-release"

// statusWriteTimeout bounds the final status write of a reconcile.
const statusWriteTimeout = 10 * time.Second

// statusRewriteDelay is when a status that could not be written is written
// again, whatever the backoff of the reconcile's failure.
const statusRewriteDelay = time.Second

// Reconciler reconciles the resources of one kind into Helm releases.
type Reconciler struct {
	// kind is the watch's settings, svc the process' services, and shared
	// what every release of the kind shares (release.Shared).
	kind   Kind
	svc    *Services
	shared *release.Shared
	status status.Writer
	// tracker is svc's Tracker, or one of this reconciler's own when it
	// watches the dependents without one (SetupWithManager).
	tracker *dependents.Tracker
	// dependents watches the kinds of the releases' objects through
	// dependentCache; both nil when disabled.
	dependents     *dependents.Watcher
	dependentCache cache.Cache
	// gate holds back retries until their backoff has passed.
	gate retryGate
	// versions are the resources' versions as this reconciler left them.
	versions versions
	// foreign remembers the foreign revisions reported (foreignEvent).
	foreign foreignReports
	// rollout stages upgrades to a new chart (rollout.go); nil when the
	// watch's rollout stages nothing.
	rollout *rollout.Coordinator
	// causes remembers why the releases' objects are not ready, per object
	// version, so that a reconcile that finds them unchanged asks nothing.
	causes *readiness.Causes
	// finalizers remembers why each resource keeps its finalizer.
	finalizers finalizerMemo
	// settle holds back a change of a resource with valuesFrom for
	// settleWindow (values.go); watchSources starts the metadata watch of
	// the objects valuesFrom references, once.
	settle       settler
	watchSources func()
	// sensitive are the paths of the values redacted from messages
	// (release.SensitivePaths of the chart's schema and the watch's list).
	sensitive []string
}

// New returns the Reconciler of opts.Kind, or an error naming what is
// missing or invalid.
func New(opts Options) (*Reconciler, error) {
	if opts.Services == nil || opts.Services.release == nil {
		return nil, errors.New("reconciler: Services are required, from NewServices")
	}
	if err := opts.Kind.check(); err != nil {
		return nil, err
	}
	k, svc := opts.Kind, opts.Services
	return &Reconciler{
		kind: k,
		svc:  svc,
		shared: &release.Shared{Services: svc.release, Chart: k.Chart, ChartDigest: release.ChartDigest(k.Chart),
			MaxHistory: k.MaxHistory, Remediation: k.Remediation, CRDs: k.CRDs, Timeout: k.Timeout, Scope: k.Scope,
			Drift: k.Drift},
		status:    status.Writer{Client: svc.Client},
		tracker:   svc.Tracker,
		causes:    readiness.NewCauses(),
		sensitive: release.SensitivePaths(k.Chart.Schema, k.SensitiveValues),
	}, nil
}

// Reconcile brings one resource's release to the state its spec asks for and
// leaves a truthful status on every exit: the status is computed from what the
// reconcile observed and written once, in a deferred function, whatever the
// path taken. A retryable failure is retried after a backoff that doubles
// with each consecutive failure and is shown in the Reconciling condition,
// at most MaxRetries times per generation; a stalled resource is not retried
// until it changes. A paused resource is left as it is (see heldBack).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	// Until the resource's values are known, nothing that could print them
	// (client-go's dumps of the responses) is logged (status.MaxLogLevel).
	log := ctrl.LoggerFrom(ctx)
	ctx = ctrl.LoggerInto(ctx, status.Redactor{}.Logger(log))
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(r.kind.GVK)
	if err := r.fetch(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetGone(req)
			obj.SetNamespace(req.Namespace)
			obj.SetName(req.Name)
			r.report(obj, status.Status{}, status.Outcome{}, true)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Events of the release's objects that arrive meanwhile are held, and
	// start another reconcile only if this one did not read what they carry.
	r.tracker.Begin(r.kind.GVK.GroupKind(), req)
	defer r.tracker.End(r.kind.GVK.GroupKind(), req)

	now := r.svc.Now()
	// What this reconcile sees of what could change a held verdict, before
	// it reads Helm's storage: a foreign change to the storage after this
	// point wakes the next reconcile, even if this one then backs off.
	inputs := r.inputsOf(obj)
	prev := status.FromObject(obj)
	if p, ok := r.gate.unwritten(obj.GetUID(), obj.GetGeneration()); ok {
		// The last status this reconciler computed never reached the server:
		// it, not the stale one there, is what the next status follows from.
		prev = p
	}
	out := status.Outcome{Generation: obj.GetGeneration(), Now: metav1.NewTime(now.Truncate(time.Second)),
		ReadinessTimeout: r.kind.ReadinessTimeout, MaxRetries: r.kind.MaxRetries, TestsEnabled: r.kind.Tests.Enable,
		DriftOff: r.kind.Drift.Mode == release.DriftOff}
	gone := false
	defer func() { r.finish(ctx, req, obj, prev, out, gone, &res) }()

	redactor := r.redactor(obj)
	// Every line logged under this reconcile, Helm's own included, is
	// redacted of the resource's values.
	ctx = ctrl.LoggerInto(ctx, redactor.Logger(log))
	if !obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, Finalizer) {
		gone = true // not ours to finish; write nothing
		return ctrl.Result{}, nil
	}
	ann, err := release.ParseAnnotations(obj.GetAnnotations())
	if err != nil {
		// Judged anew whatever the gate holds: removing or correcting the
		// annotation is acted on at once.
		r.gate.holdWhileAnnotations(obj.GetUID(), inputs.annotations)
		r.holdDeletion(ctx, obj)
		return r.failed(ctx, obj, prev, &out, err, redactor, inputs), nil
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if err := r.initialize(ctx, obj, ann, &out); err != nil {
			return r.failed(ctx, obj, prev, &out, err, redactor, inputs), nil
		}
	}
	if held, after := r.heldBack(obj, prev, ann, inputs, &out); held {
		return ctrl.Result{RequeueAfter: after}, nil
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		gone, err = r.delete(ctx, obj, &prev, &out)
		if gone {
			r.gate.clear(obj.GetUID())
		}
		if err == nil && out.DeletionPending != "" {
			return ctrl.Result{RequeueAfter: deletionPoll}, nil
		}
		return r.failed(ctx, obj, prev, &out, err, redactor, inputs), nil
	}

	out.Initialized = true

	values, redactor := r.valuesSources(ctx, obj, prev, &out, redactor)
	ctx = ctrl.LoggerInto(ctx, redactor.Logger(log))
	if values.wait > 0 {
		out.Held = true // a change settling (values.go): nothing runs yet
		return ctrl.Result{RequeueAfter: values.wait}, nil
	}
	pass := r.pass(ctx, obj, prev, &out, redactor, values)
	return r.outcome(ctx, obj, prev, &out, pass, redactor, inputs), nil
}

// finish ends the reconcile of obj (req): a resource gone is forgotten;
// any other gets the status computed from prev and out, written once, even
// when the operator is stopping (ctx cancelled), so that the status says how
// a cancelled Helm action ended. A status that could not be written is
// written again soon (res), whatever the backoff holds back.
func (r *Reconciler) finish(ctx context.Context, req ctrl.Request, obj *unstructured.Unstructured, prev status.Status, out status.Outcome, gone bool, res *ctrl.Result) {
	if gone {
		r.versions.set(req.NamespacedName, "")
		r.finalizers.forget(req.NamespacedName)
		r.svc.Memo.Forget(req.Namespace, req.Name)
		r.gate.forget(obj.GetUID())
		r.foreign.forget(obj.GetUID())
		r.svc.Warnings.Forget(obj.GetUID())
		r.settle.forget(obj.GetUID())
		r.report(obj, status.Status{}, out, true)
		return
	}
	// obj holds what the server returned for this reconcile's writes.
	defer func() { r.versions.set(req.NamespacedName, obj.GetResourceVersion()) }()
	next := status.Compute(prev, out)
	defer func() { r.report(obj, next, out, false) }()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	err := r.status.Write(wctx, obj, next)
	if err != nil && !apierrors.IsNotFound(err) {
		// The status on the server may say something no longer true (see gate).
		r.gate.keepUnwritten(obj.GetUID(), obj.GetGeneration(), next)
		ctrl.LoggerFrom(ctx).Error(err, "Writing the status failed; writing it again soon", "after", statusRewriteDelay.String())
		if res.RequeueAfter == 0 || res.RequeueAfter > statusRewriteDelay {
			res.RequeueAfter = statusRewriteDelay
		}
		return
	}
	r.gate.forgetUnwritten(obj.GetUID())
}

// WatchDependents makes changes to the objects of the kind's releases, seen
// through c (a cache of the objects labelled by package dependents),
// reconcile the resource that owns them. Call it before SetupWithManager.
func (r *Reconciler) WatchDependents(c cache.Cache) { r.dependentCache = c }

// requeueAfter is when a settled resource is reconciled again: every
// ReconcilePeriod, and, while its objects are not ready, at the readiness
// deadline, so that Stalled is set on time even if no object changes, and
// when the causes of the objects not ready are due to be looked up again
// (their pods and events are not watched).
func (r *Reconciler) requeueAfter(prev status.Status, out status.Outcome) time.Duration {
	after := r.kind.ReconcilePeriod
	if out.Readiness == nil || out.Readiness.AllReady {
		return after
	}
	if at := out.Readiness.RecheckAt; !at.IsZero() {
		if until := max(at.Sub(r.svc.Now()), 100*time.Millisecond); after == 0 || until < after {
			after = until
		}
	}
	next := status.Compute(prev, out)
	if d := status.ReadinessDeadline(next, r.kind.ReadinessTimeout); !d.IsZero() {
		if until := d.Sub(out.Now.Time) + time.Second; until > 0 && (after == 0 || until < after) {
			after = until
		}
	}
	return after
}

// failed records err in out with its reason, with the resource's values
// redacted from its message, logs it, emits its Warning event, and returns
// when to try again: after the backoff of the consecutive failures, or never
// when retrying cannot help until the resource changes.
func (r *Reconciler) failed(ctx context.Context, obj *unstructured.Unstructured, prev status.Status, out *status.Outcome, err error, redactor status.Redactor, inputs verdictInputs) ctrl.Result {
	if err == nil {
		return ctrl.Result{}
	}
	log := ctrl.LoggerFrom(ctx)
	out.Err = release.AsFailure(err)
	// Redacted whole, then shortened: the log keeps all of it.
	marked := out.Err.Message
	out.Err.Message = redactor.Safe(marked, status.MaxMessageLength)
	logged := redactor.RedactMessage(marked)
	if out.Err.Terminal() {
		if status.Repeats(prev, out.Generation, out.Err) {
			// The status and an event already say so: stay quiet.
			log.V(1).Info("Still stalled", "reason", out.Err.StalledReason)
			return ctrl.Result{}
		}
		r.event(obj, out.Err)
		log.Info("Stalled: not retried until the resource changes", "reason", out.Err.StalledReason, "error", logged)
		return ctrl.Result{}
	}
	r.event(obj, out.Err)
	if status.OutOfRetries(prev, *out) {
		// Held until the spec or the retry annotation changes, even before
		// the status that says so reaches the cache.
		r.gate.holdUntil(obj.GetUID(), inputs, time.Time{})
		log.Info("Retries exhausted: no more attempts until the spec changes or the retry annotation is set to a new value",
			"failures", status.Failures(prev, *out), "error", logged)
		return ctrl.Result{}
	}
	out.RetryAfter = r.retryAfter(obj, prev, *out)
	if d := release.RetryAfter(err); d > 0 {
		out.RetryAfter = d // the failure says when it ends (a lock becomes stale)
	}
	r.gate.holdUntil(obj.GetUID(), inputs, out.Now.Add(out.RetryAfter))
	log.Error(errors.New(logged), "Reconcile failed", "reason", out.Err.Reason, "retryAfter", out.RetryAfter.String())
	return ctrl.Result{RequeueAfter: out.RetryAfter}
}

// heldBack tells whether this reconcile must run nothing, and when to look
// again: while the resource is paused, while a failure of this generation
// backs off, and once its retries are used up, until the spec changes or the
// retry annotation gets a new value. Deletion is held by a pause too: the
// release stays until the pause is lifted. It records in out what the held
// status needs, and a new retry request, which starts a fresh budget.
func (r *Reconciler) heldBack(obj *unstructured.Unstructured, prev status.Status, ann release.Annotations, inputs verdictInputs, out *status.Outcome) (bool, time.Duration) {
	out.Paused, out.Deleting = ann.Paused, !obj.GetDeletionTimestamp().IsZero()
	if ann.Retry != "" && ann.Retry != prev.LastHandledRetry {
		out.Retry = ann.Retry
	}
	held, after := r.gate.wait(obj.GetUID(), inputs, out.Now.Time)
	out.Held = ann.Paused || held || (out.Retry == "" && status.RetriesExhausted(prev, obj.GetGeneration()))
	if ann.Paused {
		after = 0 // removing the annotation wakes it up
	}
	return out.Held, after
}

// retryAfter is the backoff of the failure of out: of the consecutive
// failures, or, for an action refused before it ran (not counted in the
// status), of the consecutive refusals, counted afresh from each change to
// the namespace's RBAC and then starting at most at rbacSettle (rbac.go).
func (r *Reconciler) retryAfter(obj *unstructured.Unstructured, prev status.Status, out status.Outcome) time.Duration {
	if !out.Err.Refused {
		r.gate.notRefused(obj.GetUID())
		return r.backoff(status.Failures(prev, out))
	}
	n, woken := r.gate.refusedAgain(obj.GetUID(), client.ObjectKeyFromObject(obj), obj.GetGeneration())
	if woken {
		return settled(r.backoff(n), n)
	}
	return r.backoff(n)
}

// backoff is the delay before retrying the n-th consecutive failure.
func (r *Reconciler) backoff(n int64) time.Duration {
	d := r.svc.RetryBase
	for i := int64(1); i < n && d < r.svc.RetryMax; i++ {
		d *= 2
	}
	return min(d, r.svc.RetryMax)
}

// redactor hides in messages what is secret of the resource's values: the
// values at the sensitive paths (the chart's schema, the watch's
// sensitiveValues) and the watch's override values (from the operator's
// environment), keeping the names messages need. The rest of the spec — a
// class name, an image, a host the user wrote — is shown: the spec is
// readable beside the status, and secrets belong in valuesFrom Secrets.
func (r *Reconciler) redactor(obj *unstructured.Unstructured) status.Redactor {
	return r.redactorWith(obj, nil)
}

// redactorWith is redactor that also hides secrets, the values read from
// Secrets (release.SecretValues).
func (r *Reconciler) redactorWith(obj *unstructured.Unstructured, secrets map[string]any) status.Redactor {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	vals := map[string]any{"sensitive": release.SensitiveValues(spec, r.sensitive), "secrets": secrets}
	for k, v := range r.kind.OverrideValues {
		vals["override:"+k] = v
	}
	keep := []string{obj.GetName(), obj.GetNamespace()}
	if md := r.kind.Chart.Metadata; md != nil {
		keep = append(keep, md.Name, md.Version, md.AppVersion)
	}
	return status.NewRedactor(vals, keep...)
}

// judgeReadiness judges the readiness of the deployed release's objects and
// makes sure changes to them reconcile the resource.
func (r *Reconciler) judgeReadiness(ctx context.Context, obj *unstructured.Unstructured, st release.State, out *status.Outcome, redactor status.Redactor) error {
	if st.Deployed == nil {
		return nil
	}
	refs, err := readiness.ObjectsFromManifest(st.Deployed.Manifest, obj.GetNamespace(), r.svc.RESTMapper)
	if err != nil {
		return &release.Error{Reason: status.ReasonReconcileError, Action: status.ActionReconcile,
			Summary: fmt.Sprintf("Reading the objects of release %s revision %d failed", st.Deployed.Name, st.Deployed.Version), Err: err}
	}
	if r.dependents != nil {
		if err := r.dependents.Ensure(readiness.ReadKinds(refs)); err != nil {
			return &release.Error{Reason: status.ReasonReconcileError, Summary: "Watching the release's objects failed", Err: err}
		}
	}
	// The cluster's words in the causes are redacted of the resource's values.
	// The API server's warnings on the action's writes are the cause of
	// the objects they were about while those are not Current.
	checker := readiness.Checker{Reader: r.svc.Reader, Causes: r.causes, Now: r.svc.Now, Redactor: redactor,
		Warnings: r.svc.Warnings, Owner: obj.GetUID(), RequireAddresses: r.kind.RequireAddresses,
		Rules: r.kind.HealthChecks, Subresources: r.svc.Subresources}
	sum := readiness.Summarize(checker.Check(ctx, refs))
	r.svc.Warnings.Retain(obj.GetUID(), refs)
	out.Readiness = &status.Readiness{
		Resources: status.Resources{Total: sum.Total, Ready: sum.Ready, NotReady: sum.NotReady, Warnings: sum.Warnings},
		AllReady:  sum.AllReady, Unknown: sum.Unreadable != "", Reason: sum.Reason, Message: sum.Message,
		RecheckAt: sum.RecheckAt,
	}
	if sum.Unreadable != "" {
		// Not a verdict on the release: retried, and never counted towards
		// the readiness deadline.
		return &release.Error{Reason: status.ReasonResourcesUnreadable,
			Summary: fmt.Sprintf("Reading the objects of release %s failed", st.Deployed.Name), Err: errors.New(sum.Unreadable)}
	}
	return nil
}
