package reconciler_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// Issue 38, item 7: what the operator remembers of a release (the newest
// revision it wrote) belongs to the resource, not to its name. A resource
// upgraded to revision 3, deleted and created again under the same name
// installs revision 1; a `helm upgrade` by hand then writes revision 2,
// which is below the old resource's 3 and is still someone else's: the
// ForeignRevision event says so, and the release is upgraded back.
//
// The deletion uninstalls (finalizer: always), so that the resource created
// again finds no record of the old one, as the scenario needs. Without a
// finalizer (issue 41's default) the garbage collector deletes the old
// records only after the resource is gone, and a resource created again at
// once may still find them: the CI run of stop 46 saw it upgrade them to
// revision 4.
func TestForeignRevisionAfterTheResourceIsCreatedAgain(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, testWatches(t, finalizerAlways), quiet)
	e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "One"}})
	e.wait(tu.NginxGVK, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	for i, title := range []string{"Two", "Three"} {
		e.patchSpec(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": title}})
		e.waitStatus(tu.NginxGVK, "web", "the upgrade to revision "+title, revisionIs(int64(i+2), status.ReasonUpgradeSuccessful))
	}
	if err := e.c.Delete(context.Background(), tu.NewCR(tu.NginxGVK, e.ns, "web", nil)); err != nil {
		t.Fatal(err)
	}
	e.waitGone(tu.NginxGVK, "web")

	cr := e.create(tu.NginxGVK, "web", map[string]any{"page": map[string]any{"title": "Again"}})
	e.waitStatus(tu.NginxGVK, "web", "the new resource's install", revisionIs(1, status.ReasonInstallSuccessful))
	e.helm("upgrade", "web", filepath.Join(tu.RepoRoot(), "helm-charts", "nginx"), "--reuse-values", "--set", "page.title=By hand")
	ev := e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventForeignRevision)
	if !strings.Contains(ev.Message, "Release web revision 2 (deployed") {
		t.Errorf("ForeignRevision event %q does not name revision 2", ev.Message)
	}
	e.waitSoon(tu.NginxGVK, "web", "the upgrade back to the spec", revisionIs(3, status.ReasonUpgradeSuccessful))
	if got := e.page("web"); got != "Again" {
		t.Errorf("the ConfigMap serves %q, want the spec's %q", got, "Again")
	}
}
