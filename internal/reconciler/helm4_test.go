package reconciler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testutil"
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
	if len(hist) != 2 || hist[0].Revision != 1 || hist[0].Status != "superseded" || hist[0].Description != "Install complete" ||
		hist[1].Revision != 2 || hist[1].Status != "deployed" || hist[1].Description != "Upgrade complete" {
		t.Errorf("helm 4 history: %+v, want revision 1 superseded (Install complete), 2 deployed (Upgrade complete)", hist)
	}

	var st struct {
		Name, Namespace string
		Version         int
		Info            struct{ Status, Description string }
	}
	e.helm4JSON(&st, "status", "web")
	if st.Name != "web" || st.Namespace != e.ns || st.Version != 2 || st.Info.Status != "deployed" || st.Info.Description != "Upgrade complete" {
		t.Errorf("helm 4 status: %+v, want web revision 2 deployed (Upgrade complete)", st)
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
