//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Scenario: a resource deleted with helmapp.io/uninstall-on-delete: "false"
// goes away and its release stays. The garbage collector of this cluster's
// kube-controller-manager collects a canary ConfigMap the resource owns, and
// none of the release's objects nor its history.
func TestDeleteKeepingTheRelease(t *testing.T) {
	e := newEnv(t, "e2e-keep", watchOptions{})
	e.applyNginx("web", "  replicaCount: 1\n")
	e.waitCondition("web", typeReady)
	uid := e.kubectl("get", "nginx", "web", "-o", "jsonpath={.metadata.uid}")
	e.apply("canary", fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: canary
  ownerReferences:
  - {apiVersion: web.helmapp.io/v1alpha1, kind: Nginx, name: web, uid: %s}
`, uid))

	e.kubectl("annotate", "nginx", "web", "helmapp.io/uninstall-on-delete=false")
	e.checkOracle(oracleOptions{})
	e.kubectl("delete", "nginx", "web", "--timeout=90s")
	e.eventually("web", "the garbage collector to delete the canary", func(context.Context) (bool, string) {
		out, err := e.tryKubectl("get", "configmap", "canary", "--ignore-not-found", "-o", "name")
		return err == nil && out == "", out
	})

	objects := []string{"deployment/web", "service/web", "configmap/web", "serviceaccount/web"}
	for _, o := range objects {
		if refs := e.kubectl("get", o, "-o", "jsonpath={.metadata.ownerReferences[*].uid}"); strings.Contains(refs, uid) {
			e.fatalf("%s is still owned by the deleted resource", o)
		}
	}
	secrets := e.kubectl("get", "secrets", "-l", "owner=helm,name=web", "-o", "jsonpath={.items[*].metadata.name}")
	if secrets == "" {
		e.fatalf("the release's history is gone")
	}
	if refs := e.kubectl("get", "secrets", "-l", "owner=helm,name=web", "-o", "jsonpath={.items[*].metadata.ownerReferences[*].uid}"); strings.Contains(refs, uid) {
		e.fatalf("the release's Secrets are still owned by the deleted resource")
	}
	if got := e.kubectl("get", "deployment", "web", "-o", "jsonpath={.status.availableReplicas}"); got != "1" {
		e.fatalf("the kept Deployment has %q available replicas, want 1", got)
	}
	if ev := e.kubectl("get", "events.events.k8s.io", "--field-selector", "reason=ReleaseKept", "-o", "jsonpath={.items[*].note}"); !strings.Contains(ev, "Release web was kept") {
		e.fatalf("no ReleaseKept event; events say %q", ev)
	}
	t.Logf("kept: %s; history %s", strings.Join(objects, ", "), secrets)
}
