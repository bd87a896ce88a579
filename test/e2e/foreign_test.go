//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Scenario: someone changes the release by hand with the helm CLI while the
// operator runs. `helm upgrade --set` is reported (a ForeignRevision event)
// and upgraded back to the spec within seconds, the status naming the
// revision Helm has deployed; `helm uninstall` is installed again.
func TestHelmByHandIsUndone(t *testing.T) {
	e := newEnv(t, "e2e-foreign", watchOptions{})
	e.applyNginx("web", "  replicaCount: 1\n  page:\n    title: From the spec\n")
	e.waitCondition("web", typeReady)
	helm := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if out, err := suite.cp.Helm(ctx, append(args, "-n", e.ns)...); err != nil {
			e.fatalf("%v\n%s", err, out)
		}
	}
	page := func() string {
		return e.kubectl("get", "configmap", "-l", "app.kubernetes.io/instance=web", "-o", "jsonpath={.items[*].data}")
	}
	revision := func() string {
		return e.kubectl("get", "nginx", "web", "-o", "jsonpath={.status.deployedRelease.revision}")
	}

	helm("upgrade", "web", filepath.Join(suite.root, "helm-charts", "nginx"), "--reuse-values", "--set", "page.title=By hand", "--description", byHand)
	e.waitEvent("web", "ForeignRevision")
	e.eventually("web", "the upgrade back to the spec", func(ctx context.Context) (bool, string) {
		h := e.helmHistory("web")
		return len(h) == 3 && h[2].Status == "deployed" && revision() == "3", fmt.Sprintf("history %+v, deployedRelease.revision %s", h, revision())
	})
	e.waitCondition("web", typeReady)
	if p := page(); !strings.Contains(p, "From the spec") || strings.Contains(p, "By hand") {
		e.fatalf("the page after the upgrade back: %s", p)
	}
	e.checkOracle(oracleOptions{})

	helm("uninstall", "web")
	e.eventually("web", "the release installed again", func(ctx context.Context) (bool, string) {
		// Read from the Secrets: `helm history` fails while there is none.
		h, err := e.history("web")
		return err == nil && len(h) == 1 && h[0] == "1=deployed" && revision() == "1", fmt.Sprintf("history %v (%v), deployedRelease.revision %s", h, err, revision())
	})
	e.waitCondition("web", typeReady)
	e.checkOracle(oracleOptions{})
}
