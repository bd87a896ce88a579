package status

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
)

// The reasons of tenancy (docs/tenancy.md): a missing permission found
// before an action, a missing ServiceAccount, and a resource that names none
// while one is required.
func TestComputeTenancyReasons(t *testing.T) {
	denied := "ServiceAccount team-a/deployer may not: create services (in team-a)"
	tests := []struct {
		name  string
		prev  func() Status
		out   Outcome
		want  want
		check func(t *testing.T, s Status)
	}{{
		name: "an install refused by the preflight is retried, and stores no revision",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 3,
			Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionInstall, Message: denied}},
		want: want{TypeReady: "False/PermissionDenied", TypeReleaseFailed: "True/PermissionDenied",
			TypeDeployed: "False/NotDeployed", TypeStalled: "False/NotStalled", TypeReconciling: "True/Retrying",
			TypeIrreconcilable: "False/NoReconcileError"},
		check: func(t *testing.T, s Status) {
			if s.FailedRelease == nil || s.FailedRelease.Revision != 0 || s.FailedRelease.Reason != ReasonPermissionDenied || s.FailedRelease.Message != denied {
				t.Errorf("failedRelease = %+v, want revision 0, PermissionDenied, %q", s.FailedRelease, denied)
			}
			if r := meta.FindStatusCondition(s.Conditions, TypeReady); r.Message != denied {
				t.Errorf("Ready's message %q, want %q", r.Message, denied)
			}
		},
	}, {
		name: "a refused upgrade keeps the deployed revision",
		prev: installed,
		out: Outcome{Generation: 2, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionUpgrade,
			Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionUpgrade, Message: denied}},
		want: want{TypeReady: "False/PermissionDenied", TypeReleaseFailed: "True/PermissionDenied", TypeDeployed: "True/InstallSuccessful"},
	}, {
		// A refusal wrote nothing: it is not a failed attempt, and the
		// budget that protects Helm's history is not spent on it.
		name: "refusals do not use up the retry budget, however many",
		prev: func() Status {
			s := Status{}
			for range 12 {
				s = Compute(s, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
					RetryAfter: 5 * time.Minute, Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionInstall, Message: denied, Refused: true}})
			}
			return s
		},
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
			RetryAfter: 5 * time.Minute, Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionInstall, Message: denied, Refused: true}},
		want: want{TypeStalled: "False/NotStalled", TypeReleaseFailed: "True/PermissionDenied", TypeReconciling: "True/Retrying",
			TypeReady: "False/PermissionDenied"},
		check: func(t *testing.T, s Status) {
			if s.Failures != 0 {
				t.Errorf("failures %d, want 0: a refusal is not a failed attempt", s.Failures)
			}
			want := "The install was refused before it ran, and nothing was written; trying again in 5m0s, " +
				"or at once when a Role or RoleBinding of the resource's namespace changes; not counted against maxRetries"
			if c := meta.FindStatusCondition(s.Conditions, TypeReconciling); c.Message != want {
				t.Errorf("Reconciling's message %q, want %q", c.Message, want)
			}
		},
	}, {
		name: "refusals between failed attempts neither count nor reset the budget",
		prev: func() Status {
			s := Compute(Status{}, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
				Err: &Failure{Reason: ReasonInstallError, Action: ActionInstall, Revision: 1, Message: "Install of release web failed"}})
			for range 12 {
				s = Compute(s, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
					Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionInstall, Message: denied, Refused: true}})
			}
			return s
		},
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
			Err: &Failure{Reason: ReasonInstallError, Action: ActionInstall, Revision: 2, Message: "Install of release web failed"}},
		want: want{TypeStalled: "True/RetriesExhausted", TypeReleaseFailed: "True/InstallError"},
		check: func(t *testing.T, s Status) {
			if s.Failures != 2 {
				t.Errorf("failures %d, want 2: the two failed installs, not the refusals between them", s.Failures)
			}
		},
	}, {
		name: "a denial the API server gave during the action is a failed attempt",
		prev: func() Status {
			return Compute(Status{}, Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
				Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionInstall, Revision: 1, Message: denied}})
		},
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall, MaxRetries: 2,
			Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionInstall, Revision: 2, Message: denied}},
		want: want{TypeStalled: "True/RetriesExhausted", TypeReleaseFailed: "True/PermissionDenied"},
	}, {
		name: "a refused re-apply is a reconcile failure",
		prev: installed,
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Deployed: rel(1), Action: ActionReconcile,
			Err: &Failure{Reason: ReasonPermissionDenied, Action: ActionReconcile, Message: denied}},
		want: want{TypeReady: "False/PermissionDenied", TypeIrreconcilable: "True/PermissionDenied",
			TypeReleaseFailed: "False/InstallSuccessful", TypeDeployed: "True/InstallSuccessful"},
	}, {
		name: "a ServiceAccount that does not exist is retried",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true, Action: ActionInstall,
			Err: &Failure{Reason: ReasonServiceAccountNotFound, Action: ActionInstall, Message: "ServiceAccount team-a/ghost, named by the annotation helmapp.io/service-account, does not exist"}},
		want: want{TypeReady: "False/ServiceAccountNotFound", TypeReleaseFailed: "True/ServiceAccountNotFound", TypeReconciling: "True/Retrying"},
	}, {
		name: "no ServiceAccount while one is required stalls",
		prev: func() Status { return Status{} },
		out: Outcome{Generation: 1, Now: now, Initialized: true, DeployedKnown: true,
			Err: &Failure{Reason: ReasonServiceAccountRequired, StalledReason: ReasonServiceAccountRequired, Message: "The operator acts only as a ServiceAccount"}},
		want: want{TypeReady: "False/ServiceAccountRequired", TypeStalled: "True/ServiceAccountRequired",
			TypeReconciling: "False/Stalled", TypeIrreconcilable: "True/ServiceAccountRequired", TypeReleaseFailed: "False/NoFailure"},
		check: func(t *testing.T, s Status) {
			if c := meta.FindStatusCondition(s.Conditions, TypeReconciling); !strings.Contains(c.Message, serviceAccountAnnotation) {
				t.Errorf("Reconciling's message %q does not say which annotation names a ServiceAccount", c.Message)
			}
			if s.Phase != "Stalled: ServiceAccountRequired" {
				t.Errorf("phase %q", s.Phase)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.prev(), tt.out)
			checkConditions(t, s, tt.want)
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}
