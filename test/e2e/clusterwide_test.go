//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestNamespaceDeletionTakesTheReleaseClusterObjects (issue 39): a release
// whose chart creates cluster-scoped objects, as real charts do (the test
// chart clusterwide: a ClusterRole, its ClusterRoleBinding and a
// ValidatingWebhookConfiguration, which the watch's scope allows), and
// whose namespace is deleted with it. The namespace controller deletes the
// release's Secrets at once, so Helm has no record to uninstall when the
// operator handles the resource's deletion; the operator still deletes the
// cluster-scoped objects it marked as the resource's before it lets the
// resource go, and the namespace's deletion ends. Before, they stayed for
// good: sealed-secrets' ClusterRole, gatekeeper's webhook configurations
// (whose failurePolicy Fail webhook then refuses every namespace's
// creation).
func TestNamespaceDeletionTakesTheReleaseClusterObjects(t *testing.T) {
	names := []any{"{{namespace}}-{{release}}-reader"}
	rule := func(group, kind string, names []any) map[string]any {
		return map[string]any{"group": group, "kind": kind, "names": names}
	}
	e := newEnv(t, "clusterwide", watchOptions{hooked: true, hookedChart: "clusterwide", hookedScope: map[string]any{
		"clusterScoped": []any{
			rule("rbac.authorization.k8s.io", "ClusterRole", names),
			rule("rbac.authorization.k8s.io", "ClusterRoleBinding", names),
			rule("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", []any{"{{namespace}}-{{release}}"}),
		},
	}})
	e.applyHooked("cw", "  {}\n")
	e.waitHookedReady("cw")
	objects := []string{
		"clusterrole/" + e.ns + "-cw-reader",
		"clusterrolebinding/" + e.ns + "-cw-reader",
		"validatingwebhookconfiguration/" + e.ns + "-cw",
	}
	for _, o := range objects {
		e.kubectl("get", o)
	}
	t.Cleanup(func() {
		// Whatever the outcome, nothing of the test outlives it.
		_, _ = e.tryKubectl(append([]string{"delete", "--ignore-not-found"}, objects...)...)
	})

	start := time.Now()
	e.kubectl("delete", "namespace", e.ns, "--timeout=2m")
	t.Logf("namespace %s deleted in %s", e.ns, time.Since(start).Round(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, o := range objects {
		out, err := suite.cp.Kubectl(ctx, "get", o, "--ignore-not-found", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("%s is left after its release's namespace was deleted (%q, %v); operator log: %s", o, out, err, e.logPath)
		}
	}
}
