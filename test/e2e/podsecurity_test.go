//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// Scenario: in a namespace that enforces Pod Security "restricted", which the
// API server itself admits or refuses, an Nginx with the chart's defaults
// becomes Ready: its pods were admitted, scheduled and became available.
func TestRestrictedNamespaceBecomesReady(t *testing.T) {
	e := newEnv(t, "e2e-restricted", watchOptions{})
	e.kubectl("label", "namespace", e.ns, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
	// The API server enforces it: a pod that is not restricted is refused.
	if _, err := e.tryKubectl("run", "not-restricted", "--image=nginx", "--dry-run=server"); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		e.fatalf("a pod without a restricted securityContext was not refused: %v", err)
	}

	e.applyNginx("web", "  replicaCount: 2\n")
	e.waitCondition("web", typeReady)
	if got := e.kubectl("get", "deployment", "web", "-o", "jsonpath={.status.availableReplicas}"); got != "2" {
		e.fatalf("deployment web has %q available replicas, want 2\n%s", got, e.describeCR("web"))
	}
	if out := e.kubectl("get", "events", "--field-selector", "reason=FailedCreate", "-o", "name"); strings.TrimSpace(out) != "" {
		e.fatalf("pods were refused in the restricted namespace: %s", out)
	}
}
