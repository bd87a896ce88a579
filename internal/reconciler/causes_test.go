package reconciler_test

import (
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// historyOf is the resource's status.history, newest first.
func historyOf(t *testing.T, u *unstructured.Unstructured) []status.HistoryEntry {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
	var h []status.HistoryEntry
	for _, r := range raw {
		var e status.HistoryEntry
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.(map[string]any), &e); err != nil {
			t.Fatal(err)
		}
		h = append(h, e)
	}
	return h
}

// wantRevisionCauses checks that status.history names revision rev, made by
// action with Helm's status st, and that its causes, in one line, begin
// with each of want in order; and, when described is set, that Helm's
// description of the revision is that line.
func (e *env) wantRevisionCauses(u *unstructured.Unstructured, rev int, action, st string, described bool, want ...string) {
	e.t.Helper()
	for _, h := range historyOf(e.t, u) {
		if h.Revision != rev || h.Action != action {
			continue
		}
		line := status.CauseLine(h.Causes)
		if h.Status != st || len(h.Causes) != len(want) || h.Started == nil || h.Finished == nil {
			e.t.Errorf("revision %d (%s): status %q, causes %q; want %s and %d causes", rev, action, h.Status, line, st, len(want))
			return
		}
		for i, c := range h.Causes {
			if s := c.Type + ": " + c.Detail; !strings.HasPrefix(s, want[i]) {
				e.t.Errorf("revision %d cause %d is %q, want %q", rev, i, s, want[i])
			}
		}
		if !described {
			return
		}
		for _, r := range history(e.t, e.ns, "web") {
			if r.Version == rev && r.Info.Description != line {
				e.t.Errorf("Helm describes revision %d as %q, want %q", rev, r.Info.Description, line)
			}
		}
		return
	}
	e.t.Errorf("status.history names no %s of revision %d: %v", action, rev, historyOf(e.t, u))
}

// Every revision the operator makes on the way of a resource's life is in
// status.history with its cause, and Helm's description says the same: the
// install of a new resource, an edit of its spec (the values keys it
// changed, never their values), a revision written by hand and undone.
func TestHistoryNamesTheCauseOfEveryRevision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "First"}})
	u := e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	e.wantRevisionCauses(u, 1, status.ActionInstall, "deployed", true, "SpecChanged: resource created at generation 1")

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "Second"}})
	u = e.waitStatus(tu.NginxGVK, "web", "the upgrade to revision 2", revisionIs(2, status.ReasonUpgradeSuccessful))
	e.wantRevisionCauses(u, 2, status.ActionUpgrade, "deployed", true, "SpecChanged: generation 1→2, values keys page")
	if line := status.CauseLine(historyOf(t, u)[0].Causes); strings.Contains(line, "Second") {
		t.Errorf("a value in the causes: %s", line)
	}

	e.helm("upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"), "--reuse-values", "--set", "page.title=By hand")
	u = e.waitSoon(tu.NginxGVK, "web", "the operator's upgrade over the foreign revision", revisionIs(4, status.ReasonUpgradeSuccessful))
	e.wantRevisionCauses(u, 4, status.ActionUpgrade, "deployed", true, "ForeignRevisionUndone: revision 3 (deployed) was written by someone else")
	// Revision 3 is not the operator's: the history does not claim it.
	h := historyOf(t, u)
	var revs []int
	for _, x := range h {
		revs = append(revs, x.Revision)
	}
	if len(h) != 3 || h[0].Revision != 4 || h[1].Revision != 2 || h[2].Revision != 1 {
		t.Errorf("status.history has revisions %v, want 4, 2, 1", revs)
	}
	// For docs/status.md ("Why each revision happened").
	t.Logf("kubectl describe:\n%s", e.describe("nginx", "web"))
	t.Logf("helm history:\n%s", e.helm("history", "web"))
}

// A failed upgrade rolled back by the watch's remediation: the failed
// revision keeps the cause of the attempt (its Helm description is Helm's
// failure), the rollback's is Remediation; a retry asked for by
// helmapp.io/retry is RetryRequested, in the history and in Helm's
// description of the revision it makes.
func TestHistoryOfARemediatedFailureAndARetry(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "upgradeRemediation: rollback"), slowRetries)
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	allow := e.denyBigDeployments()

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.waitStatus(tu.NginxGVK, "web", "the rollback of the failed upgrade", func(u *unstructured.Unstructured) bool {
		return nested(u, "status", "deployedRelease", "revision") == int64(3)
	})
	e.wantRevisionCauses(u, 2, status.ActionUpgrade, "failed", false, "SpecChanged: generation 1→2, values keys replicaCount")
	e.wantRevisionCauses(u, 3, status.ActionRollback, "deployed", false, "Remediation: upgrade to revision 2 failed: rolled back to revision 1")

	allow()
	e.annotate(tu.NginxGVK, "web", map[string]any{"helmapp.io/retry": "after-the-fix"})
	u = e.waitStatus(tu.NginxGVK, "web", "the retried upgrade", revisionIs(4, status.ReasonUpgradeSuccessful))
	e.wantRevisionCauses(u, 4, status.ActionUpgrade, "deployed", true,
		`RetryRequested: helmapp.io/retry set to "after-the-fix"`, "SpecChanged: generation 2, values keys replicaCount")
}

// A Secret valuesFrom references, edited: the revision's cause is
// ValuesSourceChanged naming the Secret and its resourceVersions; the
// spec and the Secret changed together: one revision with both causes.
func TestHistoryNamesAValuesSourceChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, quiet)
	rv1 := e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: first\n"})
	e.createWithValuesFrom("web", map[string]any{"replicaCount": int64(1)}, map[string]any{"kind": "Secret", "name": "db"})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)

	rv2 := e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: second\n"})
	u := e.waitSoon(tu.NginxGVK, "web", "the upgrade for the Secret", revisionIs(2, status.ReasonUpgradeSuccessful))
	e.wantRevisionCauses(u, 2, status.ActionUpgrade, "deployed", true,
		"ValuesSourceChanged: Secret/db key values.yaml: resourceVersion "+rv1+"→"+rv2)

	e.patchSpec(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(2)})
	rv3 := e.putSecret("db", map[string]string{"values.yaml": "page:\n  title: third\n"})
	u = e.waitSoon(tu.NginxGVK, "web", "one upgrade for both", revisionIs(3, status.ReasonUpgradeSuccessful))
	e.wantRevisionCauses(u, 3, status.ActionUpgrade, "deployed", true,
		"SpecChanged: generation 1→2, values keys ", "ValuesSourceChanged: Secret/db key values.yaml: resourceVersion "+rv2+"→"+rv3)
}

// A failed install uninstalled by the watch's remediation: the failed
// install and the uninstall are both in status.history, the uninstall's
// cause Remediation.
func TestHistoryOfAnUninstalledFailedInstall(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, "installRemediation: uninstall"), slowRetries)
	e.denyBigDeployments()
	e.create(tu.NginxGVK, "web", map[string]any{"replicaCount": int64(9)})
	u := e.wait(tu.NginxGVK, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonInstallError)
	e.wantRevisionCauses(u, 1, status.ActionUninstall, "uninstalled", false, "Remediation: install of revision 1 failed: uninstalled")
	e.wantRevisionCauses(u, 1, status.ActionInstall, "failed", false, "SpecChanged: resource created at generation 1")
}
