//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// gizmoCRD is the CRD of the custom resource that the chart customres
// creates: with a status subresource, and no controller anywhere.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.e2e.helmapp.io
spec:
  group: e2e.helmapp.io
  scope: Namespaced
  names: {kind: Gizmo, listKind: GizmoList, plural: gizmos, singular: gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// gizmoRule is the Hooked watch's health check of Gizmos, as a user would
// write it for a cert-manager Certificate.
var gizmoRule = map[string]any{
	"apiVersion": "e2e.helmapp.io/v1",
	"kind":       "Gizmo",
	"current":    "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
	"failed":     "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False' && c.reason == 'IssuerNotFound')",
	"message":    "status.conditions.filter(c, c.type == 'Ready')[0].message",
}

// withHealthChecks writes the watches file at from to to, the Hooked
// watch given the health checks checks, and returns its entry number
// (from 1).
func withHealthChecks(t *testing.T, from, to string, checks ...map[string]any) int {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, entry := range entries {
		if entry["kind"] == "Hooked" {
			entry["healthChecks"], n = checks, i+1
		}
	}
	out, err := yaml.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// A chart creates a custom resource whose controller is absent (chart
// testdata/charts/customres, kind Hooked; the Gizmo CRD has a status
// subresource): the release is Deployed but not Ready, NoStatusReported,
// naming the Gizmo. With a health check in watches.yaml, the status a
// controller would write (Ready=False IssuerNotFound) makes it Failed,
// HealthCheckFailed, with the object's own message in Ready; Ready=True
// makes the resource Ready. A health check that does not compile stops
// the operator binary at start with the entry, the field, the line and
// CEL's error.
func TestCustomResourceHealth(t *testing.T) {
	ctx := context.Background()
	if _, err := suite.cp.Kubectl(ctx, "apply", "-f", writeTemp(t, "gizmo-crd.yaml", gizmoCRD)); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after the namespace and its Gizmos.
	t.Cleanup(func() {
		_, _ = suite.cp.Kubectl(context.Background(), "delete", "crd", "gizmos.e2e.helmapp.io", "--wait=false")
	})
	if _, err := suite.cp.Kubectl(ctx, "wait", "--for=condition=Established", "crd/gizmos.e2e.helmapp.io", "--timeout="+deadline.String()); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, "health", watchOptions{hooked: true, hookedChart: "customres"})
	e.apply("hooked-app", "apiVersion: test.helmapp.io/v1\nkind: Hooked\nmetadata:\n  name: app\nspec: {size: large}\n")
	n := e.waitHooked("app", "Deployed=True, Ready=False NoStatusReported", func(n *nginx) bool {
		return n.is("Deployed", metav1.ConditionTrue) && n.is(typeReady, metav1.ConditionFalse) && n.cond(typeReady).Reason == "NoStatusReported"
	})
	for _, typ := range []string{typeReady, typeResourcesReady} {
		if c := n.cond(typ); c.Reason != "NoStatusReported" || c.Message != "Gizmo app: no status reported yet: its controller has not acted on it" {
			t.Errorf("%s: %s %q, want NoStatusReported naming the Gizmo", typ, c.Reason, c.Message)
		}
	}
	if r := n.Status.Resources; r == nil || len(r.NotReady) != 1 || r.NotReady[0].Kind != "Gizmo" {
		t.Errorf("status.resources does not list the Gizmo as not ready:\n%s", n)
	}
	t.Logf("kubectl describe hooked app, no controller:\n%s", e.kubectl("describe", "hooked", "app"))

	// The watch gains a health check: a new operator process reads it.
	if err := e.op.stop(); err != nil {
		t.Fatal(err)
	}
	withHealthChecks(t, e.watchesPath, e.watchesPath, gizmoRule)
	e.restart()
	// What a controller would write.
	e.kubectl("patch", "gizmo", "app", "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"IssuerNotFound","message":"issuer letsencrypt not found","lastTransitionTime":"2026-12-06T14:00:00Z"}]}}`)
	n = e.waitHooked("app", "Ready=False HealthCheckFailed with the Gizmo's message", func(n *nginx) bool {
		c := n.cond(typeReady)
		return n.is(typeReady, metav1.ConditionFalse) && c.Reason == "HealthCheckFailed"
	})
	if c := n.cond(typeReady); c.Message != "Gizmo app: issuer letsencrypt not found" {
		t.Errorf("Ready's message %q, want the Gizmo's own", c.Message)
	}
	if r := n.Status.Resources; r == nil || len(r.NotReady) != 1 || r.NotReady[0].Status != "Failed" {
		t.Errorf("status.resources does not list the Gizmo as Failed:\n%s", n)
	}
	t.Logf("kubectl describe hooked app:\n%s", e.kubectl("describe", "hooked", "app"))

	e.kubectl("patch", "gizmo", "app", "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Issued","message":"certificate issued","lastTransitionTime":"2026-12-06T14:01:00Z"}]}}`)
	e.waitHooked("app", "Ready=True once the Gizmo is", func(n *nginx) bool {
		return n.is(typeReady, metav1.ConditionTrue) && n.cond(typeResourcesReady).Reason == reasonAllResourcesCurrent
	})
	e.checkOracle(oracleOptions{})

	// A rule that does not compile stops the binary at start.
	bad := map[string]any{"apiVersion": "e2e.helmapp.io/v1", "kind": "Gizmo", "current": "true", "failed": "status.phase = 'Failed'"}
	badPath := filepath.Join(e.dir, "watches-bad.yaml")
	entry := withHealthChecks(t, e.watchesPath, badPath, bad)
	line := lineHolding(t, badPath, "status.phase = 'Failed'")
	logPath := filepath.Join(e.dir, "operator-bad.log")
	op, err := startOperatorEnv(e.dir, badPath, logPath, e.ns, suite.cp.KubeconfigPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-op.Done():
	case <-time.After(deadline):
		_ = op.Stop(0)
		t.Fatalf("the operator with a bad health check is still running after %s", deadline)
	}
	_ = op.Stop(0) // closes the log
	if op.Err() == nil {
		t.Errorf("the operator with a bad health check exited without an error")
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("error: watches file %s: entry %d: (test.helmapp.io/v1 Hooked): field healthChecks[0].failed (line %d): 1:14: Syntax error: token recognition error at: '= '",
		badPath, entry, line)
	if !strings.Contains(string(out), want) {
		t.Errorf("the operator's log does not say %q:\n%s", want, out)
	}
	t.Logf("the operator with a bad health check: %v; its log: %s", op.Err(), strings.TrimSpace(string(out)))
}

// lineHolding is the number of the first line of the file at path that
// holds s.
func lineHolding(t *testing.T, path, s string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), s) {
			return n
		}
	}
	t.Fatalf("%s holds no line with %q", path, s)
	return 0
}

// writeTemp writes content to a file named name in a directory of the test's.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
