package reconciler_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A user who moved their CLI to Helm 4 reads the operator's releases (made
// with the Helm 3 SDK) as they are: helm 4's list, history, status and get
// values show the release, its revisions and each revision's values, the
// same as the Helm 3 CLI shows them. Reading changes nothing.
func TestHelm4CLIReadsTheOperatorsReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(1)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
		t.Fatalf("deployedRelease.revision = %v after the upgrade, want 2", rev)
	}
	before := history(t, e.ns, "web")

	var list []struct {
		Name, Namespace, Revision, Status, Chart string
		AppVersion                               string `json:"app_version"`
	}
	e.helm4JSON(&list, "list")
	if len(list) != 1 || list[0].Name != "web" || list[0].Namespace != e.ns || list[0].Revision != "2" ||
		list[0].Status != "deployed" || list[0].Chart != "nginx-0.1.0" || list[0].AppVersion != "1.27.3" {
		t.Errorf("helm 4 list: %+v, want web revision 2 deployed of chart nginx-0.1.0 (1.27.3)", list)
	}
	if got, want := e.helm4("list", "-o", "json"), e.helm("list", "-o", "json"); got != want {
		t.Errorf("helm 4 list differs from helm 3's:\nhelm 4: %s\nhelm 3: %s", got, want)
	}

	var hist []struct {
		Revision            int
		Status, Description string
	}
	e.helm4JSON(&hist, "history", "web")
	// The descriptions are the operator's causes of each revision (issue 42).
	if len(hist) != 2 || hist[0].Revision != 1 || hist[0].Status != "superseded" || !strings.HasPrefix(hist[0].Description, "SpecChanged: resource created at generation 1") ||
		hist[1].Revision != 2 || hist[1].Status != "deployed" || !strings.HasPrefix(hist[1].Description, "SpecChanged: generation 1→2") {
		t.Errorf("helm 4 history: %+v, want revision 1 superseded (SpecChanged: resource created ...), 2 deployed (SpecChanged: generation 1→2 ...)", hist)
	}

	var st struct {
		Name, Namespace string
		Version         int
		Info            struct{ Status, Description string }
	}
	e.helm4JSON(&st, "status", "web")
	if st.Name != "web" || st.Namespace != e.ns || st.Version != 2 || st.Info.Status != "deployed" || !strings.HasPrefix(st.Info.Description, "SpecChanged: generation 1→2") {
		t.Errorf("helm 4 status: %+v, want web revision 2 deployed (SpecChanged: generation 1→2 ...)", st)
	}
	text := e.helm4("status", "web")
	for _, want := range []string{"NAME: web", "NAMESPACE: " + e.ns, "STATUS: deployed", "REVISION: 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("helm 4 status does not say %q:\n%s", want, text)
		}
	}

	for rev, want := range map[string]float64{"1": 1, "2": 2} {
		var vals map[string]any
		e.helm4JSON(&vals, "get", "values", "web", "--revision", rev)
		if vals["replicaCount"] != want {
			t.Errorf("helm 4 get values --revision %s: %v, want replicaCount %v", rev, vals, want)
		}
	}
	var current map[string]any
	e.helm4JSON(&current, "get", "values", "web")
	if current["replicaCount"] != float64(2) {
		t.Errorf("helm 4 get values: %v, want replicaCount 2", current)
	}

	// Reading wrote nothing, and the operator still owns the release.
	e.sameHistory("web", before)
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
}

// helm4 runs the Helm 4 CLI in the test's namespace.
func (e *env) helm4(args ...string) string {
	e.t.Helper()
	out, err := cp.Helm4(context.Background(), append(args, "-n", e.ns)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// helm4JSON runs the Helm 4 CLI with -o json and decodes its output into v.
func (e *env) helm4JSON(v any, args ...string) {
	e.t.Helper()
	out := e.helm4(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("helm 4 %v: %v\n%s", args, err, out)
	}
}

// serverSides are the ways a user's Helm 4 CLI applies a write to the
// operator's release: its default, "auto", which stays client-side on a
// release whose previous revision recorded no apply method (every revision
// the Helm 3 SDK writes), and server-side apply asked for. Server-side, the
// user must force the conflicts with the operator's field manager
// (TestHelm4ServerSideUpgradeConflictsWithTheOperator).
var serverSides = []struct {
	name  string
	flags []string
	ssa   bool
}{
	{"auto", []string{"--server-side", "auto"}, false},
	{"server-side-forced", []string{"--server-side", "true", "--force-conflicts"}, true},
}

// `helm upgrade --set` made with Helm 4, client-side (its default here) or
// server-side: a foreign revision like one made with Helm 3. The status names
// it, a ForeignRevision event says who wrote it, the operator's client-side
// upgrade restores the spec's values over the fields Helm 4 took, and the
// operator then goes on upgrading the release on a spec change.
func TestHelm4UpgradeByHandIsUndone(t *testing.T) {
	t.Parallel()
	for _, ss := range serverSides {
		t.Run(ss.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, quiet)
			cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "From the spec"}, "replicaCount": int64(2)})
			e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
			statuses := e.recordStatuses(tu.NginxGVK, "web")

			e.helm4(append([]string{"upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"),
				"--reuse-values", "--set", "page.title=By Helm 4,replicaCount=3"}, ss.flags...)...)
			e.undoneByTheOperator(cr, statuses, 2, `Helm's description "Upgrade complete"`, "From the spec")
			e.undoneAfterHelm4(cr, 2, ss.ssa, 2)
		})
	}
}

// `helm rollback` made with Helm 4: the same.
func TestHelm4RollbackByHandIsUndone(t *testing.T) {
	t.Parallel()
	for _, ss := range serverSides {
		t.Run(ss.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, quiet)
			cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "First"}, "replicaCount": int64(1)})
			e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
			e.patchSpec(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "Second"}, "replicaCount": int64(2)})
			e.waitStatus(tu.NginxGVK, "web", "the upgrade to revision 2", revisionIs(2, status.ReasonUpgradeSuccessful))
			statuses := e.recordStatuses(tu.NginxGVK, "web")

			e.helm4(append([]string{"rollback", "web", "1"}, ss.flags...)...)
			e.undoneByTheOperator(cr, statuses, 3, `Helm's description "Rollback to 1"`, "Second")
			e.undoneAfterHelm4(cr, 3, ss.ssa, 2)
		})
	}
}

// `helm upgrade --server-side=true` made with Helm 4 without
// --force-conflicts is refused by the API server: the fields it changes are
// owned by the operator's field manager (its binary's name, reconciler.test
// here). Helm 4 records the revision failed; the operator reports that
// foreign revision and upgrades the release back over it, and nothing of the
// user's values is left in the objects.
func TestHelm4ServerSideUpgradeConflictsWithTheOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "From the spec"}, "replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	_, err := cp.Helm4(context.Background(), "upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"), "-n", e.ns,
		"--reuse-values", "--set", "page.title=By Helm 4,replicaCount=3", "--server-side", "true")
	if err == nil {
		t.Fatal("helm 4 upgrade --server-side=true over the operator's fields succeeded without --force-conflicts")
	}
	for _, want := range []string{"conflict", `conflict with "reconciler.test"`, ".data.index.html", ".spec.replicas"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("helm 4's error does not say %q: %v", want, err)
		}
	}

	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventForeignRevision)
	for _, want := range []string{"Release web revision 2 (failed", "written by someone else", "upgrading it back"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("ForeignRevision event %q does not say %q", ev.Message, want)
		}
	}
	u := e.waitSoon(tu.NginxGVK, "web", "the operator's upgrade over the failed foreign revision", revisionIs(3, status.ReasonUpgradeSuccessful))
	expect(t, u, "Deployed=True/UpgradeSuccessful", "ReleaseFailed=False/", "Stalled=False/NotStalled")
	h := consistentHistory(t, e.ns, "web", u)
	if got := statuses(h); !slices.Equal(got, []helmrelease.Status{helmrelease.StatusSuperseded, helmrelease.StatusFailed, helmrelease.StatusDeployed}) {
		t.Errorf("Helm's history %v, want revision 1 superseded, Helm 4's 2 failed, the operator's 3 deployed", got)
	}
	if got := e.page("web"); got != "From the spec" {
		t.Errorf("the ConfigMap serves %q, want the spec's", got)
	}
	if r := e.deployment("web").Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("the Deployment has %v replicas, want the spec's 2", r)
	}
	// The operator's upgrade supersedes revision 1, not Helm 4's failed
	// revision, whose record keeps the apply method Helm 4 wrote.
	if got := e.applyMethod(2); got != "ssa" {
		t.Errorf("helm 4 get metadata --revision 2: applyMethod %q, want ssa", got)
	}
}

// undoneAfterHelm4 checks, once the operator has undone the foreign revision
// Helm 4 wrote, what undoneByTheOperator does not: server-side, Helm 4's
// field manager "helm" still applies fields of the objects (client-side its
// patch owned only the fields the operator's upgrade took back); the Helm 3
// SDK dropped the revision's apply method when it marked it superseded; the
// Deployment has the spec's replicas again; and a spec change after it is an
// ordinary upgrade, with one ForeignRevision event in all.
func (e *env) undoneAfterHelm4(cr *unstructured.Unstructured, foreign int, ssa bool, replicas int32) {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, cm); err != nil {
		e.t.Fatal(err)
	}
	applied := slices.ContainsFunc(cm.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == "helm" && m.Operation == metav1.ManagedFieldsOperationApply
	})
	if applied != ssa {
		e.t.Errorf("the ConfigMap's field managers are %v: want Helm 4's server-side apply (helm/Apply) %v", managers(cm.ManagedFields), ssa)
	}
	for _, rev := range []int{foreign, foreign + 1} {
		if got := e.applyMethod(rev); got != "" {
			e.t.Errorf("helm 4 get metadata --revision %d: applyMethod %q, want none once the Helm 3 SDK rewrote it", rev, got)
		}
	}
	if r := e.deployment("web").Spec.Replicas; r == nil || *r != replicas {
		e.t.Errorf("the Deployment has %v replicas after the undo, want the spec's %d", r, replicas)
	}

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "After Helm 4"}, "replicaCount": int64(4)})
	u := e.waitSoon(tu.NginxGVK, "web", "the upgrade on the spec change", revisionIs(int64(foreign+2), status.ReasonUpgradeSuccessful))
	h := consistentHistory(e.t, e.ns, "web", u)
	if got := h[len(h)-1]; got.Version != foreign+2 || got.Labels[rel.LabelOwnerUID] != string(cr.GetUID()) {
		e.t.Errorf("latest revision %d, owner %q: want the operator's upgrade at %d", got.Version, got.Labels[rel.LabelOwnerUID], foreign+2)
	}
	if got := e.page("web"); got != "After Helm 4" {
		e.t.Errorf("the ConfigMap serves %q after the spec change, want %q", got, "After Helm 4")
	}
	if r := e.deployment("web").Spec.Replicas; r == nil || *r != 4 {
		e.t.Errorf("the Deployment has %v replicas after the spec change, want 4", r)
	}
	if n := e.countEvents(cr, reconciler.EventForeignRevision); n != 1 {
		e.t.Errorf("%d ForeignRevision events, want 1: the operator's own revisions are not foreign", n)
	}
}

// applyMethod is how Helm 4 says revision rev was applied ("csa", "ssa", or
// "" for none recorded), read with its get metadata.
func (e *env) applyMethod(rev int) string {
	e.t.Helper()
	var md struct{ ApplyMethod string }
	e.helm4JSON(&md, "get", "metadata", "web", "--revision", strconv.Itoa(rev))
	return md.ApplyMethod
}

func managers(fields []metav1.ManagedFieldsEntry) []string {
	out := make([]string, len(fields))
	for i, m := range fields {
		out[i] = m.Manager + "/" + string(m.Operation)
	}
	return out
}
