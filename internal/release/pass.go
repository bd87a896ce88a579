package release

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// A pass is one reconcile of a resource's release, in the one order that
// keeps Helm's history consistent: observe → claim → reshard → values →
// foreign → decide → admit (the rollout's question) → run → test. The
// reconciler builds the request, makes one call (Reconcile) and turns the
// Pass it returns into the status and requeue; it is told of each step as
// the step ends (PassHooks.Step), so that the events of a step are emitted
// when it happens, not once the pass, test hooks included, returned.

// PassRequest is what one pass over a resource's release needs.
type PassRequest struct {
	// NewRunner returns the runner of the release's actions, whose Name is
	// the resource's name; it is called once the name is known valid.
	NewRunner func() (*Runner, error)
	// Object is the resource: its spec is the values, its annotations ask
	// for tests.
	Object *unstructured.Unstructured
	// OverrideValues are the watch's override values (watches.yaml).
	OverrideValues map[string]string
	// ValuesSources are the references of valuesFrom as the caller read
	// them (ReadValuesSources), merged under the spec (MergeValues).
	ValuesSources []ValuesSource
	// ValuesSourcesErr is the failure to read them: the pass ends with it
	// where it needs the values, once it has observed the release.
	ValuesSourcesErr error
	// Records, with Memo, is the metadata cache of Helm's release records,
	// indexed by RecordIndex (release name): a settled release is then
	// observed without a request (Runner.ObserveSettled). Without them the
	// history is read (Runner.Observe).
	Records     client.Reader
	RecordIndex string
	Memo        *Memo
	// Previous is the resource's status before the pass: the causes of a
	// revision are told against what it recorded (generation, valuesFrom's
	// resourceVersions, the causes of a failed revision tried again).
	Previous status.Status
	// Tests is the watch's test policy; HandledTest is the last value of
	// the test annotation already acted on (status.LastHandledTest).
	Tests       TestPolicy
	HandledTest string
	// Hooks are the moments of the pass the reconciler takes part in.
	Hooks PassHooks
}

// PassHooks are what a pass asks of its caller while it runs. Every hook
// may be nil.
type PassHooks struct {
	// Admit is the rollout's question: may the upgrade of a deployed
	// release from chart version from, caused only by a new chart
	// (ChartChangeOnly), run now? Wait, when not nil, says why not: the
	// deployed revision is re-applied meanwhile. Done, when not nil, is
	// called once the upgrade ran.
	Admit func(from string) (wait *status.RolloutWait, done func(), err error)
	// Announce says, before the action runs, what it does (msg, never
	// empty), deployed being the revision Helm has deployed meanwhile and
	// foreign the revision someone else wrote that it undoes (nil for
	// none). It returns the function that ends the announcement, called
	// once the action ended.
	Announce func(msg string, deployed *status.DeployedRelease, foreign *Foreign) (end func())
	// AnnounceTest says, before the test hooks run, that they run; p is the
	// pass so far. It returns the function that ends the announcement.
	AnnounceTest func(p *Pass, run status.TestRun) (end func())
	// Warnings, when set, is called just before the plan runs (the warnings
	// left by an earlier action were reported by it) and returns the
	// function that, once the plan ran, takes the API server's warnings on
	// the action's writes.
	Warnings func() (take func() []readiness.Warning)
	// Fresh returns the context in which what the action wrote is read
	// from the API server, not a cache (the test run's reads).
	Fresh func(context.Context) context.Context
	// Step is called once each step of the pass that did something a user
	// is told of ended, with the pass so far (see Step).
	Step func(step Step, p *Pass)
}

// Step is a step of the pass its caller is told of when it ends
// (PassHooks.Step); each is told at most once per pass.
type Step int

const (
	// StepClaimed: the release is the resource's own; Pass.Adopted says
	// whether it became so in this pass.
	StepClaimed Step = iota + 1
	// StepForeign: Pass.Foreign is the revision someone else wrote that
	// the pass is to undo (told only when there is one).
	StepForeign
	// StepRan: the plan ran; Pass.Result, RunErr and Warned say how.
	StepRan
	// StepTested: the chart's test hooks ran; Pass.Test, TestFailure and
	// TestSuperseded say how.
	StepTested
)

// Pass is everything one pass observed and did, up to the failure that
// ended it (Err).
type Pass struct {
	// Before is Helm's storage as the pass found it.
	Before State
	// DeployedKnown tells whether Deployed says what Helm has deployed: the
	// release was the resource's own (nil when it was not) and, after an
	// action, what Helm's storage held once it ended.
	DeployedKnown bool
	Deployed      *status.DeployedRelease
	// Adopted: a release with no owner became the resource's own.
	Adopted bool
	// Foreign is the revision someone else wrote that the pass undoes, nil
	// for none.
	Foreign *Foreign
	// Rollout says why an upgrade to a new chart waits, nil when none does.
	Rollout *status.RolloutWait
	// Ran tells whether the plan ran; Result is what it did and RunErr how
	// it failed.
	Ran    bool
	Result Result
	RunErr error
	// Warned are the API server's warnings on the action's writes.
	Warned []readiness.Warning
	// TestRequest is the test annotation's value acted on, empty for none;
	// Test the test run (nil when none ran), TestFailure its failure and
	// TestSuperseded the newer generation that preempted it.
	TestRequest    string
	Test           *status.TestRun
	TestFailure    string
	TestSuperseded *Superseded
	// Finalizer is the verdict of a pass that judged whether the resource
	// still needs its finalizer, nil when it did not judge.
	Finalizer *FinalizerVerdict
	// Causes are why the plan makes a revision (an install or an
	// upgrade), nil for a plan that makes none; History the entries of
	// status.history for the revisions the run made, newest first.
	Causes  []status.Cause
	History []status.HistoryEntry
	// Err is the failure that ended the pass, nil when it went through.
	Err error
}

// Wrote tells whether the pass wrote the release's objects, or may have:
// what the server holds then is newer than a cache may be.
func (p *Pass) Wrote() bool {
	return p.Ran && (p.Result.Action != status.ActionReconcile || len(p.Result.Drifted) > 0 || p.RunErr != nil)
}

// Reconcile runs one pass over req's release: it observes the release,
// claims it, relabels it into this shard, decides the one plan the spec
// needs, asks the rollout, runs the plan and then the chart's tests when
// they are due. Only a release that is the resource's own is acted on or
// described.
//
// A pass whose view of Helm's records lagged behind Helm's storage, found
// before anything was applied (the revision an install or upgrade was to
// write exists; a StaleView before a re-apply), observes again with a list
// and goes on once.
func Reconcile(ctx context.Context, req PassRequest) *Pass {
	p := &Pass{}
	p.Err = p.run(ctx, req)
	return p
}

// run is the pass; it returns its failure.
func (p *Pass) run(ctx context.Context, req PassRequest) error {
	obj := req.Object
	if err := ValidateName(obj.GetName()); err != nil {
		return err
	}
	r, err := req.NewRunner()
	if err != nil {
		return err
	}
	before, err := observe(ctx, r, req)
	if err != nil {
		return err
	}
	err = p.act(ctx, r, req, before)
	if errors.Is(err, errAssumedWrong) || isStale(err) {
		// The view of Helm's records was behind Helm's storage, and
		// nothing was applied: Helm's install or upgrade stopped when the
		// API server refused the record of its revision (it exists: the
		// metadata cache showed no record of the release, or someone wrote
		// that revision since the observation — a `helm upgrade` by hand
		// landing first), or a re-apply found, before writing, that the
		// revision it restores is no longer the latest (StaleView).
		// Observe with a list and go on from what is there, as a pass over a
		// current cache would have; nothing of the refused attempt is
		// reported (its progress message is replaced by the next one's).
		if isStale(err) && req.Memo != nil {
			req.Memo.Forget(obj.GetNamespace(), obj.GetName())
		}
		*p = Pass{}
		r.assumedNone, r.reobserved = false, true
		if before, err = r.Observe(); err != nil {
			return err
		}
		err = p.act(ctx, r, req, before)
	}
	return err
}

// act is the pass from what it observed (before): claim, reshard, decide,
// run, test.
func (p *Pass) act(ctx context.Context, r *Runner, req PassRequest, before State) error {
	obj := req.Object
	p.Before = before
	// What Helm already holds may need the finalizer before the claim
	// adopts it or anything else is written: a revision of the helm CLI, or
	// one the checks below refuse, whose deletion is then held (DecideDeletion)
	// rather than left to the garbage collector. Judging reads, acts on nothing.
	if err := r.finalizeStored(before); err != nil {
		return err
	}
	// The choke point of what Helm's storage holds: no record's manifest
	// is read, applied or deleted before it is checked here, first against
	// what the operator wrote (trust.go), then against the release's scope
	// (scope.go): nothing of a failing record is adopted, relabelled,
	// re-applied, upgraded over or rolled back to.
	if err := r.CheckRecords(before); err != nil {
		return err
	}
	if err := r.RecordsInScope(before); err != nil {
		return err
	}
	var err error
	if p.Adopted, err = r.Claim(before); err != nil {
		p.DeployedKnown, p.Deployed = true, nil
		return err
	}
	p.step(req, StepClaimed)
	// A resource relabelled into this shard: its revisions are relabelled
	// in place, no new revision (docs/sharding.md).
	if _, err := r.Reshard(before); err != nil {
		return err
	}
	p.DeployedKnown, p.Deployed = true, Describe(before.Deployed, r.DigestKey)
	if req.ValuesSourcesErr != nil {
		return req.ValuesSourcesErr
	}
	vals, err := MergeValues(obj, req.ValuesSources, req.OverrideValues)
	if err != nil {
		return err
	}
	want := Desired{ValuesDigest: ValuesDigest(vals), ChartDigest: r.ChartDigest}
	if f := r.Foreign(&before, want); f != nil && !f.Same {
		p.Foreign = f
		p.step(req, StepForeign)
	}
	plan, done := Decide(before, want), func() {}
	facts := CauseFacts{Before: before, Want: want, Vals: vals, Object: obj, Previous: req.Previous,
		Sources: req.ValuesSources, Foreign: p.Foreign, Adopted: p.Adopted, ChartTo: r.chartVersion()}
	if d := before.Deployed; d != nil && d.Chart != nil && d.Chart.Metadata != nil {
		facts.ChartFrom = d.Chart.Metadata.Version
	}
	if req.Hooks.Admit != nil && plan == PlanUpgrade && ChartChangeOnly(before, want) {
		wait, admitted, err := req.Hooks.Admit(facts.ChartFrom)
		switch {
		case err != nil:
			return err
		case wait != nil:
			plan, p.Rollout = PlanReapply, wait
		case admitted != nil:
			done, facts.Admitted = admitted, true
		}
	}
	switch plan {
	case PlanInstall, PlanRetryInstall, PlanUpgrade, PlanUnlock:
		// Told to Helm as the revision's description (install.go,
		// upgrade.go), so that helm history says it too.
		p.Causes = Causes(facts)
		r.nameInitiators(ctx, obj, p.Causes)
		r.description = status.CauseLine(p.Causes)
	}
	started := r.now()
	p.runPlan(ctx, r, req, plan, done, before, vals)
	if errors.Is(p.RunErr, errAssumedWrong) || isStale(p.RunErr) {
		return p.RunErr // nothing was applied: run observes again
	}
	// The history shows the keyed digest, as deployedRelease does (never
	// the plain one, which would let a guess of a secret value be tested).
	p.History = madeRevisions(before, p.Result, p.RunErr, p.Causes, facts.ChartTo, r.DigestKey, r.DigestKey.Values(vals), metaTime(started), metaTime(r.now()))
	p.step(req, StepRan)
	if p.RunErr != nil {
		return p.RunErr
	}
	p.Finalizer = r.unfinalize(before, p.Result)
	p.test(ctx, r, req)
	return nil
}

// runPlan runs the admitted plan, announced while it runs, and then gives
// the rollout's slot back (done).
func (p *Pass) runPlan(ctx context.Context, r *Runner, req PassRequest, plan Plan, done func(), before State, vals map[string]any) {
	end := func() {}
	if msg := r.ProgressMessage(plan, before); msg != "" && req.Hooks.Announce != nil {
		var undone *Foreign
		if plan == PlanUpgrade {
			undone = p.Foreign
		}
		end = req.Hooks.Announce(msg, p.Deployed, undone)
	}
	take := func() []readiness.Warning { return nil }
	if req.Hooks.Warnings != nil {
		take = req.Hooks.Warnings()
	}
	p.Ran = true
	p.Result, p.RunErr = r.Run(ctx, plan, before, vals)
	done()
	end()
	p.Warned = take()
	if !p.Result.Observed {
		return
	}
	// What the action read back is a record too: someone may have written
	// a revision since the choke point of act, and the readiness of its
	// objects is judged next. A read-back record out of scope is not
	// described nor its objects read; the next pass stops at act's check.
	if err := r.RecordsInScope(p.Result.State); err != nil {
		p.Result.Observed = false
		if p.RunErr == nil {
			p.RunErr = err
		}
		return
	}
	p.Deployed = Describe(p.Result.State.Deployed, r.DigestKey)
}

// observe reads the release from the records' cache and the memo of
// settled revisions when the request has both, else its history.
func observe(ctx context.Context, r *Runner, req PassRequest) (State, error) {
	if req.Records == nil || req.Memo == nil {
		return r.Observe()
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := req.Records.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingFields{req.RecordIndex: r.Name}); err != nil {
		// The cache cannot say: the history can.
		return r.Observe()
	}
	recs := make([]Record, 0, len(list.Items))
	r.records = make([]metav1.Object, 0, len(list.Items))
	for i, it := range list.Items {
		recs = append(recs, Record{Key: it.Name, ResourceVersion: it.ResourceVersion, Labels: it.Labels})
		r.records = append(r.records, &list.Items[i])
	}
	st, _, err := r.ObserveSettled(recs, req.Memo)
	return st, err
}

// test runs the chart's test hooks when the watch enables them and the run
// deployed a revision by an install or an upgrade, or the test annotation
// has a value not yet acted on; never on a pass that changed nothing. A
// newer generation preempts a run waiting on a test hook (TestSuperseded).
func (p *Pass) test(ctx context.Context, r *Runner, req PassRequest) {
	res := p.Result
	if !req.Tests.Enable || !res.Observed || res.State.Deployed == nil {
		return
	}
	ann, err := ParseAnnotations(req.Object.GetAnnotations())
	if err != nil {
		return
	}
	requested := ann.Test != "" && ann.Test != req.HandledTest
	deployed := res.Succeeded && (res.DeployedBy == status.ActionInstall || res.DeployedBy == status.ActionUpgrade)
	if !requested && !deployed {
		return
	}
	if requested {
		p.TestRequest = ann.Test
	}
	if p.Wrote() && req.Hooks.Fresh != nil {
		ctx = req.Hooks.Fresh(ctx)
	}
	end := func() {}
	if req.Hooks.AnnounceTest != nil {
		end = req.Hooks.AnnounceTest(p, status.TestRun{Revision: res.State.Deployed.Version, IgnoreFailures: req.Tests.IgnoreFailures})
	}
	run, failure, superseded := r.Test(ctx, req.Tests.Timeout)
	end()
	run.IgnoreFailures = req.Tests.IgnoreFailures
	p.Test, p.TestFailure, p.TestSuperseded = &run, failure, superseded
	p.step(req, StepTested)
}

// step tells the caller that step ended.
func (p *Pass) step(req PassRequest, step Step) {
	if req.Hooks.Step != nil {
		req.Hooks.Step(step, p)
	}
}
