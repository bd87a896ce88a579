//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// Scenario: an Echo named like a running Nginx. The Echo is refused with
// ReleaseNameConflict and touches nothing of the Nginx's; deleting it
// uninstalls nothing; once the Nginx is deleted, the Echo installs. Driven
// with kubectl and read back with the helm CLI, as a user would.
func TestReleaseNameTakenByAnotherKind(t *testing.T) {
	e := newEnv(t, "e2e-owner", watchOptions{})
	e.applyNginx("web", "  replicaCount: 1\n")
	e.waitCondition("web", typeReady)
	before := e.helmHistory("web")
	if len(before) != 1 || before[0].Chart != "nginx-0.1.0" || before[0].Status != "deployed" {
		e.fatalf("helm history web after the Nginx install: %+v", before)
	}
	dep := e.kubectl("get", "deployment", "web", "-o", "jsonpath={.metadata.uid}/{.metadata.resourceVersion}")

	echo := "apiVersion: web.helmapp.io/v1alpha1\nkind: Echo\nmetadata:\n  name: web\nspec: {}\n"
	e.apply("echo-web", echo)
	e.kubectlWait("echo/web", "Stalled")
	if got := e.kubectl("get", "echo", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].reason}: {.status.conditions[?(@.type=="Ready")].message}`); !strings.HasPrefix(got, "ReleaseNameConflict: Release web belongs to Nginx "+e.ns+"/web") {
		e.fatalf("echo/web Ready: %s", got)
	}
	if got := e.kubectl("get", "echo", "web", "-o", "jsonpath={.status.deployedRelease}"); got != "" {
		e.fatalf("echo/web claims a deployed release: %s", got)
	}

	e.kubectl("delete", "echo", "web", "--timeout=60s")
	if got := e.kubectl("get", "deployment", "web", "-o", "jsonpath={.metadata.uid}/{.metadata.resourceVersion}"); got != dep {
		e.fatalf("the Nginx's Deployment changed or was replaced: %s, was %s", got, dep)
	}
	for _, kind := range []string{"service", "configmap"} {
		e.kubectl("get", kind, "web")
	}
	e.waitCondition("web", typeReady)
	if after := e.helmHistory("web"); len(after) != 1 || after[0] != before[0] {
		e.fatalf("helm history web after the Echo came and went: %+v, was %+v", after, before)
	}

	e.apply("echo-web", echo)
	e.kubectlWait("echo/web", "Stalled")
	e.checkOracle(oracleOptions{stalled: []string{"Echo/web"}})
	e.kubectl("delete", "nginx", "web", "--timeout=60s")
	e.kubectlWait("echo/web", "Ready")
	if h := e.helmHistory("web"); len(h) != 1 || h[0].Chart != "echo-0.1.0" || h[0].Status != "deployed" {
		e.fatalf("helm history web after the Nginx left: %+v", h)
	}
	e.kubectl("delete", "echo", "web", "--timeout=60s")
}

// helmRevision is a row of `helm history -o json`.
type helmRevision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Chart       string `json:"chart"`
	Description string `json:"description"`
}

func (e *env) helmHistory(release string) []helmRevision {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := suite.cp.Helm(ctx, "history", release, "-n", e.ns, "-o", "json")
	if err != nil {
		e.fatalf("%v", err)
	}
	var h []helmRevision
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		e.fatalf("helm history %s: %v\n%s", release, err, out)
	}
	return h
}

// kubectlWait runs `kubectl wait --for=condition=<cond>` on obj (kind/name).
func (e *env) kubectlWait(obj, cond string) {
	e.t.Helper()
	if _, err := e.tryKubectl("wait", "--for=condition="+cond, "--timeout="+deadline.String(), obj); err != nil {
		out, _ := e.tryKubectl("get", obj, "-o", "yaml")
		e.fatalf("%v\n%s", err, out)
	}
}
