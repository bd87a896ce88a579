package status

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

func rel(rev int) *DeployedRelease {
	return &DeployedRelease{Name: "web", Namespace: "ns", Revision: rev, Chart: "nginx", ChartVersion: "0.1.0", Status: "deployed"}
}

// want is "Type=Status/Reason" for each condition that must hold.
type want map[string]string

func checkConditions(t *testing.T, s Status, w want) {
	t.Helper()
	for typ, exp := range w {
		c := meta.FindStatusCondition(s.Conditions, typ)
		if c == nil {
			t.Errorf("condition %s missing; want %s", typ, exp)
			continue
		}
		if got := string(c.Status) + "/" + c.Reason; got != exp {
			t.Errorf("condition %s = %s (%q); want %s", typ, got, c.Message, exp)
		}
	}
	for _, c := range s.Conditions {
		if c.Reason == "" {
			t.Errorf("condition %s has an empty reason", c.Type)
		}
		if c.Type == TypeResourcesReady && c.ObservedGeneration < s.ObservedGeneration {
			continue // a readiness verdict not judged since keeps its generation
		}
		if c.ObservedGeneration != s.ObservedGeneration {
			t.Errorf("condition %s observedGeneration %d, status says %d", c.Type, c.ObservedGeneration, s.ObservedGeneration)
		}
		if strings.Contains(c.Message, "\n") || len(c.Message) > MaxMessageLength {
			t.Errorf("condition %s message is not one bounded line: %q", c.Type, c.Message)
		}
	}
}

func installed() Status {
	return Compute(Status{}, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true,
		Deployed: rel(1), DeployedBy: ActionInstall, Action: ActionInstall})
}

func TestCompute(t *testing.T) {
	upgradeErr := &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Revision: 2, Message: "Upgrade of release web to revision 2 failed: admission webhook denied"}
	tests := []struct {
		name  string
		prev  func() Status
		out   Outcome
		want  want
		check func(t *testing.T, s Status)
	}{{
		name: "first install succeeds",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true,
			Deployed: rel(1), DeployedBy: ActionInstall, Action: ActionInstall},
		want: want{TypeReady: "True/InstallSuccessful", TypeDeployed: "True/InstallSuccessful",
			TypeReleaseFailed: "False/InstallSuccessful", TypeIrreconcilable: "False/ReconcileSuccessful",
			TypeStalled: "False/NotStalled", TypeReconciling: "False/Succeeded", TypeInitialized: "True/Initialized"},
		check: func(t *testing.T, s Status) {
			if s.Failures != 0 || s.LastAttemptedGeneration != 1 || s.DeployedRelease.Revision != 1 || s.FailedRelease != nil {
				t.Errorf("unexpected fields: %+v", s)
			}
		},
	}, {
		name: "install fails and will be retried",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall,
			Err: &Failure{Reason: ReasonInstallError, Action: ActionInstall, Revision: 1, Message: "Install of release web failed: forbidden"}},
		want: want{TypeReady: "False/InstallError", TypeDeployed: "False/NotDeployed",
			TypeReleaseFailed: "True/InstallError", TypeReconciling: "True/Retrying", TypeStalled: "False/NotStalled",
			TypeIrreconcilable: "False/NoReconcileError"},
		check: func(t *testing.T, s Status) {
			f := s.FailedRelease
			if f == nil || f.Action != ActionInstall || f.Revision != 1 || f.Reason != ReasonInstallError || !f.Time.Equal(&now) {
				t.Errorf("failedRelease = %+v", f)
			}
			if s.Failures != 1 || s.DeployedRelease != nil {
				t.Errorf("failures %d deployedRelease %+v", s.Failures, s.DeployedRelease)
			}
		},
	}, {
		name: "upgrade fails after a good install: the old revision stays deployed",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
			Action: ActionUpgrade, Err: upgradeErr},
		want: want{TypeReady: "False/UpgradeError", TypeDeployed: "True/InstallSuccessful",
			TypeReleaseFailed: "True/UpgradeError", TypeReconciling: "True/Retrying"},
		check: func(t *testing.T, s Status) {
			if s.DeployedRelease.Revision != 1 || s.FailedRelease.Revision != 2 || s.FailedRelease.Action != ActionUpgrade {
				t.Errorf("deployed %+v failed %+v", s.DeployedRelease, s.FailedRelease)
			}
			if s.LastAttemptedGeneration != 2 {
				t.Errorf("lastAttemptedGeneration %d", s.LastAttemptedGeneration)
			}
		},
	}, {
		name: "a failed upgrade rolled back: the rollback's revision is deployed, the failure stands",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(3),
			DeployedBy: ActionRollback, Action: ActionUpgrade, RetryAfter: time.Second,
			Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Revision: 2,
				Message: "Upgrade of release web to revision 2 failed: denied; rolled back to revision 1"}},
		want: want{TypeReady: "False/UpgradeError", TypeDeployed: "True/RollbackSuccessful",
			TypeReleaseFailed: "True/UpgradeError", TypeReconciling: "True/Retrying", TypeStalled: "False/NotStalled"},
		check: func(t *testing.T, s Status) {
			if s.DeployedRelease.Revision != 3 || s.FailedRelease.Revision != 2 || s.Failures != 1 ||
				!strings.HasSuffix(s.FailedRelease.Message, "; rolled back to revision 1") {
				t.Errorf("deployed %+v failed %+v failures %d", s.DeployedRelease, s.FailedRelease, s.Failures)
			}
		},
	}, {
		name: "an annotation that does not parse stalls the resource",
		prev: installed,
		out: Outcome{Generation: 1, Now: now, Initialized: true,
			Err: &Failure{Reason: ReasonInvalidAnnotation, StalledReason: ReasonInvalidAnnotation, Message: "The annotation x is not a boolean"}},
		want: want{TypeReady: "False/InvalidAnnotation", TypeStalled: "True/InvalidAnnotation",
			TypeIrreconcilable: "True/InvalidAnnotation", TypeReconciling: "False/Stalled", TypeDeployed: "True/InstallSuccessful"},
	}, {
		name: "uninstalled, waiting for the release's objects to go",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, Deleting: true, DeployedKnown: true, Uninstalled: true,
			Action: ActionUninstall, DeletionPending: "Waiting for 1 objects of release web to be deleted: ConfigMap/web"},
		want: want{TypeReady: "Unknown/Deleting", TypeReconciling: "True/Deleting", TypeDeployed: "False/UninstallSuccessful",
			TypeReleaseFailed: "False/UninstallSuccessful", TypeStalled: "False/NotStalled"},
		check: func(t *testing.T, s Status) {
			if c := meta.FindStatusCondition(s.Conditions, TypeReconciling); !strings.HasPrefix(c.Message, "Waiting for 1 objects") {
				t.Errorf("Reconciling message %q", c.Message)
			}
		},
	}, {
		name: "fixing the spec recovers; the failure is kept for inspection",
		prev: func() Status {
			return Compute(installed(), Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true,
				Deployed: rel(1), Action: ActionUpgrade, Err: upgradeErr})
		},
		out: Outcome{Generation: 3, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(3),
			DeployedBy: ActionUpgrade, Action: ActionUpgrade},
		want: want{TypeReady: "True/UpgradeSuccessful", TypeDeployed: "True/UpgradeSuccessful",
			TypeReleaseFailed: "False/UpgradeSuccessful", TypeReconciling: "False/Succeeded"},
		check: func(t *testing.T, s Status) {
			if s.Failures != 0 || s.FailedRelease == nil || s.FailedRelease.Revision != 2 || s.DeployedRelease.Revision != 3 {
				t.Errorf("failures %d failed %+v deployed %+v", s.Failures, s.FailedRelease, s.DeployedRelease)
			}
		},
	}, {
		name: "values rejected by the chart stall the resource",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
			Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, StalledReason: ReasonInvalidValues,
				Message: "Upgrade of release web to revision 2 failed: values don't meet the specifications of the schema(s):\nnginx:\n- replicaCount: Invalid type"}},
		want: want{TypeReady: "False/InvalidValues", TypeStalled: "True/InvalidValues", TypeReconciling: "False/Stalled",
			TypeReleaseFailed: "True/UpgradeError", TypeDeployed: "True/InstallSuccessful"},
		check: func(t *testing.T, s Status) {
			if s.FailedRelease.Revision != 0 {
				t.Errorf("no revision was stored, failedRelease says %d", s.FailedRelease.Revision)
			}
		},
	}, {
		name: "a revision too large for a Secret stalls the resource, the deployed revision stays",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
			Err: &Failure{Reason: ReasonReleaseTooLarge, Action: ActionUpgrade, StalledReason: ReasonReleaseTooLarge,
				Message: "Upgrade of release web to revision 2 failed: revision 2 is 1500000 bytes encoded, over the 1048576 bytes of a Secret; set storage: chunked"}},
		want: want{TypeReady: "False/ReleaseTooLarge", TypeStalled: "True/ReleaseTooLarge", TypeReconciling: "False/Stalled",
			TypeReleaseFailed: "True/ReleaseTooLarge", TypeDeployed: "True/InstallSuccessful", TypeIrreconcilable: "False/NoReconcileError"},
		check: func(t *testing.T, s Status) {
			if s.FailedRelease == nil || s.FailedRelease.Reason != ReasonReleaseTooLarge || s.FailedRelease.Revision != 0 || s.DeployedRelease.Revision != 1 {
				t.Errorf("failed %+v deployed %+v", s.FailedRelease, s.DeployedRelease)
			}
		},
	}, {
		name: "an upgrade whose manifest holds an object out of scope is refused, stalled; the deployed revision stays",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
			Err: &Failure{Reason: ReasonOutOfScope, Action: ActionUpgrade, StalledReason: ReasonOutOfScope, Refused: true,
				Message: "The upgrade of release web was refused: ConfigMap kube-system/x (from nginx/templates/ingress.yaml) is outside the release namespace default; the watch's scope does not allow it; nothing was applied"}},
		want: want{TypeReady: "False/OutOfScope", TypeStalled: "True/OutOfScope", TypeReconciling: "False/Stalled",
			TypeReleaseFailed: "True/OutOfScope", TypeDeployed: "True/InstallSuccessful", TypeIrreconcilable: "False/NoReconcileError"},
		check: func(t *testing.T, s Status) {
			if s.FailedRelease == nil || s.FailedRelease.Revision != 0 || s.Failures != 0 || s.DeployedRelease.Revision != 1 {
				t.Errorf("failed %+v failures %d deployed %+v", s.FailedRelease, s.Failures, s.DeployedRelease)
			}
		},
	}, {
		name: "a record read back out of scope is not acted on: stalled, the status keeps what it knew",
		prev: installed,
		out: Outcome{Generation: 1, Now: now, Initialized: true,
			Err: &Failure{Reason: ReasonOutOfScope, StalledReason: ReasonOutOfScope,
				Message: "The record of release web revision 1 (Secret sh.helm.release.v1.web.v1): ConfigMap team-b/victim is outside the release namespace default; ..."}},
		want: want{TypeReady: "False/OutOfScope", TypeStalled: "True/OutOfScope", TypeReconciling: "False/Stalled",
			TypeIrreconcilable: "True/OutOfScope", TypeDeployed: "True/InstallSuccessful"},
		check: func(t *testing.T, s Status) {
			if s.DeployedRelease == nil || s.DeployedRelease.Revision != 1 {
				t.Errorf("deployed %+v, want revision 1 as before", s.DeployedRelease)
			}
		},
	}, {
		name: "a CRD the API server refuses fails the upgrade before it runs, retried",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade, RetryAfter: time.Second,
			Err: &Failure{Reason: ReasonCRDApplyError, Action: ActionUpgrade,
				Message: "Upgrade of release web failed: applying the chart's CRD things.example.com: status.storedVersions[0]: Invalid value"}},
		want: want{TypeReady: "False/CRDApplyError", TypeReleaseFailed: "True/CRDApplyError", TypeReconciling: "True/Retrying",
			TypeStalled: "False/NotStalled", TypeDeployed: "True/InstallSuccessful", TypeIrreconcilable: "False/NoReconcileError"},
	}, {
		name: "an unreadable release state does not erase what is deployed",
		prev: installed,
		out: Outcome{Generation: 1, Now: now, Initialized: true,
			Err: &Failure{Reason: ReasonErrorGettingReleaseState, Message: "Reading the history of release web failed: etcd timeout"}},
		want: want{TypeReady: "False/ErrorGettingReleaseState", TypeIrreconcilable: "True/ErrorGettingReleaseState",
			TypeDeployed: "True/InstallSuccessful", TypeReleaseFailed: "False/InstallSuccessful", TypeReconciling: "True/Retrying"},
		check: func(t *testing.T, s Status) {
			if s.DeployedRelease == nil || s.DeployedRelease.Revision != 1 || s.FailedRelease != nil {
				t.Errorf("deployed %+v failed %+v", s.DeployedRelease, s.FailedRelease)
			}
		},
	}, {
		name: "re-applying the objects fails: Deployed stays True",
		prev: installed,
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionReconcile,
			Err: &Failure{Reason: ReasonReconcileError, Action: ActionReconcile, Message: "Re-applying failed: forbidden"}},
		want: want{TypeReady: "False/ReconcileError", TypeIrreconcilable: "True/ReconcileError",
			TypeDeployed: "True/InstallSuccessful", TypeReleaseFailed: "False/InstallSuccessful"},
		check: func(t *testing.T, s Status) {
			if s.FailedRelease == nil || s.FailedRelease.Action != ActionReconcile {
				t.Errorf("failedRelease %+v", s.FailedRelease)
			}
		},
	}, {
		name: "a release locked by an operation that may still run waits for the lock",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, RetryAfter: 4 * time.Minute,
			Err: &Failure{Reason: ReasonReleaseLocked, Message: "Release web revision 1 is locked in pending-install by an operation that has not finished, written 1m0s ago; it is unlocked at 2026-11-29T12:04:00Z, when it is older than the watch's timeout 5m0s"}},
		want: want{TypeReady: "False/ReleaseLocked", TypeIrreconcilable: "True/ReleaseLocked", TypeReconciling: "True/Retrying",
			TypeDeployed: "False/NotDeployed", TypeReleaseFailed: "False/NoFailure", TypeStalled: "False/NotStalled"},
		check: func(t *testing.T, s Status) {
			if c := meta.FindStatusCondition(s.Conditions, TypeReconciling); !strings.Contains(c.Message, "lock") || !strings.Contains(c.Message, "4m0s") {
				t.Errorf("Reconciling message %q does not say it waits for the lock, and how long", c.Message)
			}
			if s.FailedRelease != nil {
				t.Errorf("a lock is no failed Helm action: failedRelease %+v", s.FailedRelease)
			}
		},
	}, {
		name: "the finalizer cannot be added",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now,
			Err: &Failure{Reason: ReasonErrorAddingFinalizer, Message: "Adding the finalizer failed: denied"}},
		want: want{TypeInitialized: "False/ErrorAddingFinalizer", TypeIrreconcilable: "True/ErrorAddingFinalizer",
			TypeReady: "False/ErrorAddingFinalizer", TypeDeployed: "Unknown/ErrorGettingReleaseState"},
	}, {
		name: "uninstall fails: the deletion is retried",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, Deleting: true, Action: ActionUninstall,
			Err: &Failure{Reason: ReasonUninstallError, Action: ActionUninstall, Message: "Uninstall of release web failed: pre-delete hook failed"}},
		want: want{TypeReleaseFailed: "True/UninstallError", TypeReconciling: "True/Retrying", TypeReady: "False/UninstallError",
			TypeDeployed: "True/InstallSuccessful"},
		check: func(t *testing.T, s Status) {
			c := meta.FindStatusCondition(s.Conditions, TypeReconciling)
			if !strings.Contains(c.Message, "deletion is being retried") {
				t.Errorf("Reconciling message %q does not say the deletion is retried", c.Message)
			}
		},
	}, {
		name: "uninstall succeeds",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, Deleting: true, Action: ActionUninstall,
			DeployedKnown: true, Uninstalled: true},
		want: want{TypeDeployed: "False/UninstallSuccessful", TypeReleaseFailed: "False/UninstallSuccessful",
			TypeReady: "False/UninstallSuccessful", TypeReconciling: "False/Succeeded"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := tt.prev()
			snapshot := prev.DeepCopy()
			s := Compute(prev, tt.out)
			if s.ObservedGeneration != tt.out.Generation {
				t.Errorf("observedGeneration %d, want %d", s.ObservedGeneration, tt.out.Generation)
			}
			checkConditions(t, s, tt.want)
			if tt.check != nil {
				tt.check(t, s)
			}
			if !equalStatus(prev, *snapshot) {
				t.Errorf("Compute changed its input")
			}
		})
	}
}

func equalStatus(a, b Status) bool {
	if len(a.Conditions) != len(b.Conditions) || a.Failures != b.Failures {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i] != b.Conditions[i] {
			return false
		}
	}
	return true
}

func TestLastTransitionTimeMovesOnlyOnFlip(t *testing.T) {
	s := installed()
	ready := meta.FindStatusCondition(s.Conditions, TypeReady)
	ready.LastTransitionTime = metav1.NewTime(ready.LastTransitionTime.Add(-time.Hour))
	old := ready.LastTransitionTime

	same := Compute(s, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionReconcile})
	if got := meta.FindStatusCondition(same.Conditions, TypeReady).LastTransitionTime; !got.Equal(&old) {
		t.Errorf("Ready did not flip but its lastTransitionTime moved from %s to %s", old, got)
	}
	flipped := Compute(s, Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1),
		Action: ActionUpgrade, Err: &Failure{Reason: ReasonUpgradeError, Action: ActionUpgrade, Message: "x"}})
	if got := meta.FindStatusCondition(flipped.Conditions, TypeReady).LastTransitionTime; got.Equal(&old) {
		t.Errorf("Ready flipped to False but its lastTransitionTime stayed %s", got)
	}
}

func TestProgressingSaysWhatIsUnderWayAndKeepsTheVerdicts(t *testing.T) {
	s := Progressing(installed(), 2, "Upgrading release web to revision 2")
	checkConditionsAt(t, s, 2, want{TypeReconciling: "True/Progressing", TypeReady: "Unknown/Progressing",
		TypeDeployed: "True/InstallSuccessful", TypeReleaseFailed: "False/InstallSuccessful"})
	if c := meta.FindStatusCondition(s.Conditions, TypeReady); c.Message != "Upgrading release web to revision 2" {
		t.Errorf("Ready message %q", c.Message)
	}
}

func checkConditionsAt(t *testing.T, s Status, gen int64, w want) {
	t.Helper()
	for typ, exp := range w {
		c := meta.FindStatusCondition(s.Conditions, typ)
		if c == nil || string(c.Status)+"/"+c.Reason != exp {
			t.Errorf("condition %s = %+v; want %s", typ, c, exp)
		}
	}
	if c := meta.FindStatusCondition(s.Conditions, TypeReconciling); c.ObservedGeneration != gen {
		t.Errorf("Reconciling observedGeneration %d, want %d", c.ObservedGeneration, gen)
	}
}

func TestReadyNeedsTheCurrentGeneration(t *testing.T) {
	s := installed()
	Summarize(&s, 2) // the spec moved on; status still describes generation 1
	if c := meta.FindStatusCondition(s.Conditions, TypeReady); c.Status == metav1.ConditionTrue {
		t.Errorf("Ready is True for generation 2 while status describes generation 1: %+v", c)
	}
}

func TestBound(t *testing.T) {
	long := strings.Repeat("é", 2000) + "\nsecond line"
	got := Bound(long, MaxMessageLength)
	if len(got) > MaxMessageLength || !strings.HasSuffix(got, TruncationMark) || strings.Contains(got, "\n") {
		t.Errorf("Bound gave %d bytes ending %q", len(got), got[len(got)-20:])
	}
	if got := Bound("a\n  b\tc", 100); got != "a b c" {
		t.Errorf("Bound folded white space to %q", got)
	}
	if got := Bound("short", 100); got != "short" {
		t.Errorf("Bound changed a short message to %q", got)
	}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor(map[string]any{
		"password": "hunter2-s3cret",
		"nested":   map[string]any{"list": []any{"multi\nline secret"}},
		"short":    "abc",
		"name":     "web-frontend",
	}, "web-frontend")
	got := r.Redact(`admission denied: data "hunter2-s3cret" and "multi\nline secret" for web-frontend (abc)`)
	want := `admission denied: data "[redacted]" and "[redacted]" for web-frontend (abc)`
	if got != want {
		t.Errorf("Redact gave\n%s\nwant\n%s", got, want)
	}
}

func withReadiness(all bool, reason, msg string) *Readiness {
	r := &Readiness{AllReady: all, Reason: reason, Message: msg, Resources: Resources{Total: 4, Ready: 4}}
	if !all {
		r.Resources.Ready = 3
		r.Resources.NotReady = []NotReadyObject{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Status: "InProgress", Message: msg}}
	}
	return r
}

func TestComputeReadiness(t *testing.T) {
	deployed := rel(1)
	deployed.LastDeployed = &metav1.Time{Time: now.Add(-time.Minute)}
	base := func(r *Readiness, timeout time.Duration) Outcome {
		return Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: deployed,
			DeployedBy: ActionInstall, Action: ActionInstall, Readiness: r, ReadinessTimeout: timeout}
	}
	tests := []struct {
		name string
		out  Outcome
		want want
	}{
		{"all current", base(withReadiness(true, ReasonAllResourcesCurrent, "All 4 resources are Current"), 0),
			want{TypeReady: "True/InstallSuccessful", TypeResourcesReady: "True/AllResourcesCurrent", TypeReconciling: "False/Succeeded"}},
		{"coming up", base(withReadiness(false, ReasonResourcesInProgress, "Deployment web: 1/2 replicas available"), 5*time.Minute),
			want{TypeReady: "False/InProgress", TypeResourcesReady: "False/InProgress", TypeReconciling: "True/Progressing",
				TypeStalled: "False/NotStalled", TypeDeployed: "True/InstallSuccessful"}},
		{"failed object", base(withReadiness(false, ReasonResourcesFailed, "Job migrate: failed"), 0),
			want{TypeReady: "False/Failed", TypeResourcesReady: "False/Failed", TypeReconciling: "True/Progressing"}},
		{"past the deadline", base(withReadiness(false, ReasonResourcesInProgress, "Deployment web: 0/2 replicas available; pod web-x: Unschedulable"), 30*time.Second),
			want{TypeReady: "False/ProgressDeadlineExceeded", TypeStalled: "True/ProgressDeadlineExceeded",
				TypeReconciling: "False/Stalled", TypeResourcesReady: "False/InProgress"}},
	}
	// Not ready since two minutes, for a watch that allows 30s.
	notReadySince := func() Status {
		early := tests[3].out
		early.Now = metav1.NewTime(now.Add(-2 * time.Minute))
		return Compute(Status{}, early)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := Status{}
			if i == 3 {
				prev = notReadySince()
			}
			s := Compute(prev, tt.out)
			checkConditions(t, s, tt.want)
			if s.Resources == nil || s.Resources.Total != 4 {
				t.Errorf("resources = %+v", s.Resources)
			}
		})
	}

	// Stalled by the deadline names the objects.
	s := Compute(notReadySince(), tests[3].out)
	if msg := meta.FindStatusCondition(s.Conditions, TypeStalled).Message; !strings.Contains(msg, "Unschedulable") || !strings.Contains(msg, "30s") {
		t.Errorf("Stalled message %q", msg)
	}
	// A reconcile that did not judge readiness keeps the verdict with the
	// generation that judged it: an old verdict never passes for a new one.
	later := Compute(s, Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: deployed,
		Err: &Failure{Reason: ReasonErrorGettingReleaseState, Message: "x"}})
	checkConditions(t, later, want{TypeResourcesReady: "False/InProgress"})
	if c := meta.FindStatusCondition(later.Conditions, TypeResourcesReady); c.ObservedGeneration != 1 {
		t.Errorf("ResourcesReady not judged at generation 2 claims observedGeneration %d", c.ObservedGeneration)
	}
	// Uninstalled: no release, no resources.
	gone := Compute(s, Outcome{Generation: 2, Now: now, Initialized: true, Deleting: true, Action: ActionUninstall, DeployedKnown: true, Uninstalled: true})
	checkConditions(t, gone, want{TypeResourcesReady: "False/NoDeployedRelease"})
	if gone.Resources != nil {
		t.Errorf("resources kept after uninstall: %+v", gone.Resources)
	}
}

func TestReadinessDeadlineStartsWhenReadinessIsLost(t *testing.T) {
	d := rel(1)
	d.LastDeployed = &metav1.Time{Time: now.Add(-24 * time.Hour)}
	s := Status{DeployedRelease: d}
	if got := ReadinessDeadline(s, time.Minute); !got.Equal(now.Add(-24*time.Hour + time.Minute)) {
		t.Errorf("deadline without a readiness verdict: %s", got)
	}
	s.Conditions = []metav1.Condition{{Type: TypeResourcesReady, Status: metav1.ConditionFalse, Reason: ReasonResourcesInProgress,
		LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Second))}}
	if got := ReadinessDeadline(s, time.Minute); !got.Equal(now.Add(50 * time.Second)) {
		t.Errorf("a release deployed a day ago that lost readiness 10s ago is due at %s, want now+50s", got)
	}
	if !ReadinessDeadline(s, 0).IsZero() {
		t.Errorf("a zero timeout must mean no deadline")
	}
}

// A terminal failure that repeats the standing Stalled verdict is not a new
// failure: the count, failedRelease and its time stay, so nothing is written.
func TestRepeatedStallIsNotCounted(t *testing.T) {
	conflict := &Failure{Reason: ReasonReleaseNameConflict, StalledReason: ReasonReleaseNameConflict,
		Message: "Release web belongs to Nginx ns/web (web.helmapp.io); nothing was changed"}
	invalid := &Failure{Reason: ReasonInvalidValues, StalledReason: ReasonInvalidValues, Action: ActionInstall,
		Message: "Install of release web failed: replicaCount must be an integer"}
	for _, f := range []*Failure{conflict, invalid} {
		t.Run(f.Reason, func(t *testing.T) {
			first := Compute(Status{}, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Err: f})
			checkConditions(t, first, want{TypeStalled: "True/" + f.StalledReason, TypeReady: "False/" + f.StalledReason})
			later := metav1.NewTime(now.Add(time.Hour))
			again := Compute(first, Outcome{Generation: 1, Now: later, Initialized: true, DeployedKnown: true, Err: f})
			if !Repeats(first, 1, f) || again.Failures != 1 {
				t.Errorf("a repeated stall counted again: failures %d", again.Failures)
			}
			if !equalStatus(first, again) {
				t.Errorf("a repeated stall changed the status:\n%+v\n%+v", first, again)
			}
			// A new generation, or another message, is news.
			if Repeats(first, 2, f) {
				t.Error("a stall of generation 1 repeats for generation 2")
			}
			other := *f
			other.Message += " (again)"
			if next := Compute(first, Outcome{Generation: 1, Now: later, Initialized: true, DeployedKnown: true, Err: &other}); next.Failures != 2 {
				t.Errorf("a different stall was not counted: failures %d", next.Failures)
			}
		})
	}
}
