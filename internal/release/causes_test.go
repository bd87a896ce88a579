package release

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
)

var testNow = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func causeObject(gen int64, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetName("web")
	u.SetGeneration(gen)
	u.SetAnnotations(ann)
	return u
}

func withValues(r *release.Release, vals map[string]any, chartDigest string) *release.Release {
	r.Config = vals
	r.Labels = map[string]string{LabelChartDigest: chartDigest}
	return r
}

// Every plan that makes a revision gets at least one cause, and each
// difference between what the resource asks for and what Helm holds is
// named by its own cause, with names only, never a value.
func TestCauses(t *testing.T) {
	deployed := withValues(rev(1, release.StatusDeployed, testNow), map[string]any{"image": "nginx:1", "password": "hunter2", "replicas": 1}, "c1")
	newVals := map[string]any{"image": "nginx:2", "password": "hunter2", "replicas": 1}
	same := map[string]any{"image": "nginx:1", "password": "hunter2", "replicas": 1}
	src := func(rv string) []ValuesSource {
		return []ValuesSource{{Ref: ValuesReference{Kind: "Secret", Name: "db", ValuesKey: "values.yaml"}, Found: rv != "", ResourceVersion: rv}}
	}
	prevSrc := []status.ValuesSource{{Kind: "Secret", Name: "db", ValuesKey: "values.yaml", ResourceVersion: "10", Found: true}}
	failed := withValues(rev(2, release.StatusFailed, testNow), newVals, "c1")
	tests := []struct {
		name  string
		facts CauseFacts
		want  []string // "Type: detail" prefixes, in order
	}{
		{"a first install", CauseFacts{Object: causeObject(1, nil), Vals: same, Want: Desired{ChartDigest: "c1"}},
			[]string{"SpecChanged: resource created at generation 1"}},
		{"a spec edit", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(3, nil), Vals: newVals,
			Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 2}},
			[]string{"SpecChanged: generation 2→3, values keys image"}},
		{"a Secret edit", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(2, nil), Vals: newVals,
			Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 2, ValuesSources: prevSrc}, Sources: src("11")},
			[]string{"ValuesSourceChanged: Secret/db key values.yaml: resourceVersion 10→11"}},
		{"spec and Secret together", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(3, nil), Vals: newVals,
			Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 2, ValuesSources: prevSrc}, Sources: src("11")},
			[]string{"SpecChanged: generation 2→3, values keys image", "ValuesSourceChanged: Secret/db key values.yaml: resourceVersion 10→11"}},
		{"a new chart admitted", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(2, nil), Vals: same,
			Want: Desired{ChartDigest: "c2"}, Previous: status.Status{LastAttemptedGeneration: 2}, ChartFrom: "1.0.0", ChartTo: "1.1.0", Admitted: true},
			[]string{"ChartChanged: chart 1.0.0→1.1.0, admitted by the staged rollout"}},
		{"a foreign revision", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(2, nil), Vals: same,
			Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 2}, Foreign: &Foreign{Revision: 1, Status: release.StatusDeployed}},
			[]string{"ForeignRevisionUndone: revision 1 (deployed) was written by someone else"}},
		{"adopted", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(2, nil), Vals: newVals,
			Want: Desired{ChartDigest: "c1"}, Previous: status.Status{}, Adopted: true},
			[]string{"Adopted: the release had no owner", "SpecChanged: generation 2, values keys image"}},
		{"the retry annotation", CauseFacts{Before: State{Latest: failed, Deployed: deployed}, Object: causeObject(2, map[string]string{AnnotationRetry: "now"}),
			Vals: newVals, Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 2, LastHandledRetry: "before"}},
			[]string{`RetryRequested: helmapp.io/retry set to "now"`, "SpecChanged: generation 2, values keys image"}},
		{"a failed install tried again", CauseFacts{Before: State{Latest: withValues(rev(1, release.StatusFailed, testNow), same, "c1")}, Object: causeObject(1, nil),
			Vals: same, Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 1,
				History: []status.HistoryEntry{{Revision: 1, Causes: []status.Cause{{Type: status.CauseSpecChanged, Detail: "resource created at generation 1"}}}}}},
			[]string{"RetryRequested: revision 1 failed and is tried again", "SpecChanged: resource created at generation 1"}},
		{"nothing but the operator", CauseFacts{Before: State{Latest: deployed, Deployed: deployed}, Object: causeObject(2, nil), Vals: same,
			Want: Desired{ChartDigest: "c1"}, Previous: status.Status{LastAttemptedGeneration: 2}},
			[]string{"OperatorUpgraded: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Causes(tt.facts)
			line := status.CauseLine(got)
			if len(got) != len(tt.want) {
				t.Fatalf("causes %s, want %d: %q", line, len(tt.want), tt.want)
			}
			for i, c := range got {
				s := c.Type + ": " + c.Detail
				if !strings.HasPrefix(s, tt.want[i]) {
					t.Errorf("cause %d is %q, want %q", i, s, tt.want[i])
				}
			}
			if strings.Contains(line, "hunter2") || strings.Contains(line, "nginx:2") {
				t.Errorf("a value in the causes: %s", line)
			}
		})
	}
}

// The field manager of a spec change is the one whose managed fields of
// spec are newest.
func TestSpecManager(t *testing.T) {
	u := causeObject(2, nil)
	t1, t2 := metav1.NewTime(testNow), metav1.NewTime(testNow.Add(time.Minute))
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Time: &t1, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}},
		{Manager: "kubectl-edit", Time: &t2, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:image":{}}}`)}},
		{Manager: "helm-app-operator", Time: &t2, Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
	})
	if m := specManager(u); m != "kubectl-edit" {
		t.Errorf("manager %q, want kubectl-edit", m)
	}
}

// The revisions a run made: the action's, and a remediation's after it.
func TestMadeRevisions(t *testing.T) {
	c := []status.Cause{{Type: status.CauseSpecChanged, Detail: "generation 1→2"}}
	ch := &chart.Chart{Metadata: &chart.Metadata{Version: "1.0.0"}}
	dep := rev(1, release.StatusDeployed, testNow)
	up := rev(2, release.StatusDeployed, testNow)
	up.Chart = ch
	failedUp := rev(2, release.StatusFailed, testNow)
	rolled := rev(3, release.StatusDeployed, testNow)
	rolled.Info.Description = "Rollback to 1"
	now := metav1.NewTime(testNow)
	tests := []struct {
		name   string
		before State
		res    Result
		err    error
		want   string // revision/action/status of each entry
	}{
		{"an upgrade", State{Latest: dep, Deployed: dep}, Result{Action: status.ActionUpgrade, Observed: true, State: State{Latest: up, Deployed: up}}, nil, "2/upgrade/deployed"},
		{"a failed upgrade", State{Latest: dep, Deployed: dep}, Result{Action: status.ActionUpgrade, Observed: true, State: State{Latest: failedUp, Deployed: dep}},
			&Error{Revision: 2}, "2/upgrade/failed"},
		{"rolled back", State{Latest: dep, Deployed: dep}, Result{Action: status.ActionUpgrade, DeployedBy: status.ActionRollback, Observed: true,
			State: State{Latest: rolled, Deployed: rolled}}, &Error{Revision: 2}, "3/rollback/deployed 2/upgrade/failed"},
		{"a failed install uninstalled", State{}, Result{Action: status.ActionInstall, Observed: true}, &Error{Revision: 1}, "1/uninstall/uninstalled 1/install/failed"},
		{"refused before Helm stored anything", State{Latest: dep, Deployed: dep}, Result{Action: status.ActionUpgrade, Observed: true, State: State{Latest: dep, Deployed: dep}},
			&Error{}, ""},
		{"a re-apply", State{Latest: dep, Deployed: dep}, Result{Action: status.ActionReconcile, Observed: true, State: State{Latest: dep, Deployed: dep}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := madeRevisions(tt.before, tt.res, tt.err, c, "1.0.0", DigestKey("k"), "hmac-sha256:x", now, now)
			var s []string
			for _, e := range got {
				s = append(s, strings.Join([]string{strconv.Itoa(e.Revision), e.Action, e.Status}, "/"))
				if len(e.Causes) == 0 {
					t.Errorf("revision %d has no cause", e.Revision)
				}
			}
			if g := strings.Join(s, " "); g != tt.want {
				t.Errorf("entries %q, want %q", g, tt.want)
			}
		})
	}
}
