//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Killed with SIGKILL while an install is held in a hook, the operator
// leaves the release pending-install. Started again, with the spec changed
// so that the hook no longer blocks, it unlocks the release (it was written
// before this process began) and installs it: Ready, one deployed revision,
// none pending.
func TestKilledDuringInstallHook(t *testing.T) {
	e := newEnv(t, "e2e-kill-install", watchOptions{hooked: true, timeout: "10m"})
	e.applyHooked("h", "  block: true\n")
	e.waitHeldInHook("h", 1, "pending-install")

	e.kill()
	e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"block":false}}`)
	e.restart()

	n, rev := e.waitHookedReady("h")
	e.waitEvent("h", "ReleaseUnlocked")
	e.checkHistory("h", rev, n)
	e.checkOracle(oracleOptions{})
}

// The same for an upgrade: revision 1 is deployed, the upgrade to revision 2
// is held in its pre-upgrade hook when the operator is killed. The next
// process unlocks revision 2 and upgrades over it; revision 1 stays deployed
// until revision 3 is.
func TestKilledDuringUpgradeHook(t *testing.T) {
	e := newEnv(t, "e2e-kill-upgrade", watchOptions{hooked: true, timeout: "10m"})
	e.applyHooked("h", "  block: false\n")
	e.waitHookedReady("h")
	e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"block":true}}`)
	e.waitHeldInHook("h", 2, "pending-upgrade")

	e.kill()
	e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"block":false,"data":{"greeting":"again"}}}`)
	e.restart()

	n, rev := e.waitHookedReady("h")
	e.waitEvent("h", "ReleaseUnlocked")
	if rev != 3 {
		e.fatalf("deployedRelease.revision %d, want 3 (an upgrade over the unlocked revision 2)\n%s", rev, n)
	}
	e.checkHistory("h", rev, n)
	if got := e.kubectl("get", "configmap", "h", "-o", "jsonpath={.data.greeting}"); got != "again" {
		e.fatalf("the ConfigMap says %q: the upgrade after the unlock did not apply the new spec", got)
	}
	e.checkOracle(oracleOptions{})
}

// applyHooked applies a Hooked named name with the given spec (YAML,
// indented two spaces under spec:).
func (e *env) applyHooked(name, spec string) {
	e.t.Helper()
	e.apply("hooked-"+name, fmt.Sprintf("apiVersion: test.helmapp.io/v1\nkind: Hooked\nmetadata:\n  name: %s\nspec:\n%s", name, spec))
}

// waitHeldInHook waits until the hook Job of release name exists and Helm's
// storage shows revision as status: the action is held in the hook.
func (e *env) waitHeldInHook(name string, revision int, status string) {
	e.t.Helper()
	e.eventually(name, fmt.Sprintf("revision %d %s, held in its hook Job", revision, status), func(ctx context.Context) (bool, string) {
		h, err := e.history(name)
		if err != nil {
			return false, err.Error()
		}
		_, jobErr := e.tryKubectl("get", "job", name+"-wait")
		return jobErr == nil && len(h) > 0 && h[len(h)-1] == fmt.Sprintf("%d=%s", revision, status),
			fmt.Sprintf("history %v, hook job: %v", h, jobErr)
	})
}

// waitHookedReady waits until hooked/name is Ready for its current
// generation and returns it with its deployedRelease.revision.
func (e *env) waitHookedReady(name string) (*nginx, int64) {
	e.t.Helper()
	var got *nginx
	var rev int64
	e.eventually(name, "hooked/"+name+" Ready at its generation", func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(hookedGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := &nginx{}
		if err := fromUnstructured(u, n); err != nil {
			return false, err.Error()
		}
		got = n
		rev, _, _ = unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision")
		return n.is(typeReady, metav1.ConditionTrue), n.String()
	})
	return got, rev
}

// waitEvent waits for an event of reason about the resource name.
func (e *env) waitEvent(name, reason string) {
	e.t.Helper()
	e.eventually(name, "event "+reason, func(ctx context.Context) (bool, string) {
		out, err := e.tryKubectl("get", "events", "--field-selector", "involvedObject.name="+name,
			"-o", "jsonpath={range .items[*]}{.reason}{\" \"}{end}")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(" "+out, " "+reason+" "), "events: " + out
	})
}

// history reads release name's history from Helm's release Secrets, as
// "revision=status", oldest first.
func (e *env) history(name string) ([]string, error) {
	out, err := e.tryKubectl("get", "secrets", "-l", "owner=helm,name="+name,
		"-o", `jsonpath={range .items[*]}{.metadata.labels.version}={.metadata.labels.status}{"\n"}{end}`)
	if err != nil {
		return nil, err
	}
	h := strings.Fields(out)
	sort.Slice(h, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.SplitN(h[i], "=", 2)[0])
		b, _ := strconv.Atoi(strings.SplitN(h[j], "=", 2)[0])
		return a < b
	})
	return h, nil
}

// checkHistory checks that release name has exactly one deployed revision,
// the status' deployedRelease.revision, and none pending.
func (e *env) checkHistory(name string, deployedRevision int64, n *nginx) {
	e.t.Helper()
	h, err := e.history(name)
	if err != nil {
		e.fatalf("reading the history of %s: %v", name, err)
	}
	var deployed []string
	for _, r := range h {
		rev, st, _ := strings.Cut(r, "=")
		if strings.HasPrefix(st, "pending") {
			e.t.Errorf("revision %s is still %s; history %v", rev, st, h)
		}
		if st == "deployed" {
			deployed = append(deployed, rev)
		}
	}
	if len(deployed) != 1 || deployed[0] != strconv.FormatInt(deployedRevision, 10) {
		e.t.Errorf("history %v: want exactly one deployed revision, deployedRelease.revision %d\n%s", h, deployedRevision, n)
	}
	e.t.Logf("history of %s: %v", name, h)
}
