//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// Scenario (issue 41): a release whose every object is in its resource's
// namespace and whose chart has no delete hook needs no finalizer. The
// resource says so (Initialized), its deletion is not held, and the garbage
// collector of this cluster's kube-controller-manager deletes its objects
// and Helm's records after it: `helm list --all` shows nothing.
func TestDeletionWithoutFinalizerCollectsTheRelease(t *testing.T) {
	e := newEnv(t, "e2e-collect", watchOptions{})
	e.applyNginx("web", "  replicaCount: 1\n")
	e.waitCondition("web", typeReady)
	if f := e.kubectl("get", "nginx", "web", "-o", "jsonpath={.metadata.finalizers}"); f != "" {
		e.fatalf("nginx/web has finalizers %s, want none", f)
	}
	msg := e.kubectl("get", "nginx", "web", "-o", `jsonpath={.status.conditions[?(@.type=="Initialized")].message}`)
	if !strings.Contains(msg, "garbage-collected") {
		e.fatalf("Initialized says %q, want that the release is garbage-collected with the resource", msg)
	}
	if secrets := e.kubectl("get", "secrets", "-l", "owner=helm,name=web", "-o", "name"); secrets == "" {
		e.fatalf("no record of release web before the deletion")
	}

	e.kubectl("delete", "nginx", "web", "--timeout=30s")
	objects := []string{"deployment/web", "service/web", "configmap/web", "serviceaccount/web"}
	e.eventually("web", "the garbage collector to delete the release's objects and records", func(context.Context) (bool, string) {
		out, err := e.tryKubectl(append([]string{"get", "--ignore-not-found", "-o", "name"}, objects...)...)
		if err != nil || out != "" {
			return false, out
		}
		out, err = e.tryKubectl("get", "secrets", "-l", "owner=helm,name=web", "-o", "name")
		return err == nil && out == "", out
	})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := suite.cp.Helm(ctx, "list", "-n", e.ns, "--all", "-o", "json")
	if err != nil {
		e.fatalf("%v", err)
	}
	var listed []json.RawMessage
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 0 {
		e.fatalf("helm list --all after the deletion: %s (%v), want no release", out, err)
	}
	if ev := e.kubectl("get", "events.events.k8s.io", "--field-selector", "reason=UninstallSucceeded", "-o", "name"); ev != "" {
		e.fatalf("an UninstallSucceeded event (%s): the operator uninstalled what the collector deletes", ev)
	}
}
