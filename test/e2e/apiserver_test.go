//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// apiServerDown is how long kube-apiserver stays stopped in a restart: long
// enough that requests under way fail and watches break.
const apiServerDown = 3 * time.Second

// The kube-apiserver is restarted (same etcd) while installs of two
// resources and upgrades of two others are under way. Afterwards every
// resource converges: Ready at its generation, deployedRelease at the
// revision Helm deployed, and a consistent history (exactly one deployed,
// none pending). One restart covers both actions: a restart waits out the
// API server's graceful shutdown, which takes most of the test's time.
func TestAPIServerRestartDuringInstallsAndUpgrades(t *testing.T) {
	e := newEnv(t, "e2e-apiserver", watchOptions{})
	upgraded, installed := []string{"a", "b"}, []string{"c", "d"}

	for _, n := range upgraded {
		e.applyNginx(n, "  replicaCount: 1\n")
	}
	for _, n := range upgraded {
		e.waitConverged(n, "")
	}

	for _, n := range installed {
		e.applyNginx(n, "  replicaCount: 1\n")
	}
	for _, n := range upgraded {
		e.kubectl("patch", "nginx", n, "--type=merge", "-p", `{"spec":{"page":{"title":"after the restart"}}}`)
	}
	e.waitReleaseWritten(upgraded, 2)
	e.restartAPIServer()
	for _, n := range installed {
		e.waitConverged(n, "")
	}
	for _, n := range upgraded {
		e.waitConverged(n, "after the restart")
	}
}

// waitReleaseWritten waits until Helm's storage holds revision of at least
// one of the releases: the actions are under way.
func (e *env) waitReleaseWritten(names []string, revision int) {
	e.t.Helper()
	e.eventually(names[0], fmt.Sprintf("a revision %d of one of %v in Helm's storage", revision, names), func(ctx context.Context) (bool, string) {
		var seen []string
		for _, n := range names {
			h, err := e.history(n)
			if err != nil {
				return false, err.Error()
			}
			seen = append(seen, fmt.Sprintf("%s: %v", n, h))
			if len(h) >= revision {
				return true, ""
			}
		}
		return false, strings.Join(seen, "; ")
	})
}

// restartAPIServer restarts kube-apiserver, failing the test if it cannot.
func (e *env) restartAPIServer() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := suite.cp.RestartAPIServer(ctx, apiServerDown); err != nil {
		e.fatalf("%v", err)
	}
	e.t.Logf("kube-apiserver restarted (down %s)", apiServerDown)
}

// waitConverged waits until nginx/name is Ready at its generation, with its
// deployedRelease the one deployed revision of a consistent history, and
// its page titled title (unless empty).
func (e *env) waitConverged(name, title string) {
	e.t.Helper()
	var n *nginx
	var rev int64
	e.eventually(name, "nginx/"+name+" Ready at its generation", func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(nginxGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n = &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		rev, _, _ = unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision")
		return n.is(typeReady, metav1.ConditionTrue) && !n.is(typeReconciling, metav1.ConditionTrue), n.String()
	})
	e.checkHistory(name, rev, n)
	if title == "" {
		return
	}
	page := e.kubectl("get", "configmap", "-l", "app.kubernetes.io/instance="+name, "-o", "jsonpath={.items[*].data}")
	if !strings.Contains(page, title) {
		e.fatalf("the page of %s does not carry %q after convergence: %s\n%s", name, title, page, n)
	}
}
