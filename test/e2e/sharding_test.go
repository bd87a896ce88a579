//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/util/rand"
)

// auditEvent is what the shard test reads of an audit event.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// auditEvents returns the audit events of the namespace ns by user.
func auditEvents(t *testing.T, ns string) map[string][]auditEvent {
	t.Helper()
	f, err := os.Open(suite.cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]auditEvent{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if ev.ObjectRef.Namespace == ns {
			out[ev.User.Username] = append(out[ev.User.Username], ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shardOf tells which shard's resource an object of the test is named
// after: its release objects, Helm release records and events all start
// with the resource's name.
func shardOf(name string) string {
	name = strings.TrimPrefix(name, "sh.helm.release.v1.")
	switch {
	case strings.HasPrefix(name, "sa-"):
		return "a"
	case strings.HasPrefix(name, "sr-"):
		return "rest"
	}
	return ""
}

// TestShards runs two operator processes over one namespace, one for shard
// a (--watch-label-selector=helmapp.io/shard=a) and one for the rest
// (!helmapp.io/shard), each with its own user, over 20 resources, 10 each.
// Every resource becomes Ready; the API server's audit log shows that each
// process read and wrote only its own resources, their objects and their
// release records. Killing shard a leaves the other's resources served (one
// of them is upgraded meanwhile); restarting it recovers its own (one of
// them is upgraded).
func TestShards(t *testing.T) {
	e := &env{t: t, ns: "shards-" + rand.String(5), dir: testDir(t)}
	e.kubectl("create", "namespace", e.ns)
	t.Cleanup(func() {
		if _, err := e.tryKubectl("delete", "namespace", e.ns, "--wait=false"); err != nil {
			t.Errorf("deleting namespace %s: %v", e.ns, err)
		}
	})
	e.watchesPath = filepath.Join(e.dir, "watches.yaml")
	if err := writeWatches(e.watchesPath, watchOptions{}); err != nil {
		t.Fatal(err)
	}
	users := map[string]string{"a": "shard-a-operator", "rest": "shard-rest-operator"}
	selectors := map[string]string{"a": "helmapp.io/shard=a", "rest": "!helmapp.io/shard"}
	kubeconfigs := map[string]string{}
	for shard, user := range users {
		kc, _, err := suite.cp.AddUser(user, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigs[shard] = kc
	}
	ops := map[string]*operator{}
	starts := 0
	start := func(shard string) {
		starts++
		log := filepath.Join(e.dir, fmt.Sprintf("operator-%s-%d.log", shard, starts))
		op, err := startOperatorAs(e.dir, e.watchesPath, log, e.ns, kubeconfigs[shard], "--watch-label-selector="+selectors[shard])
		if err != nil {
			t.Fatal(err)
		}
		ops[shard] = op
		t.Logf("shard %s: pid %d, log %s", shard, op.Pid(), log)
	}
	start("a")
	start("rest")
	t.Cleanup(func() {
		for shard, op := range ops {
			if err := op.stop(); err != nil {
				t.Errorf("shard %s: %v (log %s)", shard, err, op.logPath)
			}
		}
	})
	t.Cleanup(func() {
		// While both run, so that each uninstalls its own.
		if _, err := e.tryKubectl("delete", "nginx", "--all", "--timeout=90s"); err != nil {
			t.Errorf("deleting the test's resources: %v", err)
		}
	})

	var manifest strings.Builder
	names := map[string][]string{}
	for i := range 10 {
		for _, shard := range []string{"a", "rest"} {
			name := fmt.Sprintf("s%s-%d", shard[:1], i)
			names[shard] = append(names[shard], name)
			labels := ""
			if shard == "a" {
				labels = "\n  labels:\n    helmapp.io/shard: a"
			}
			fmt.Fprintf(&manifest, "---\napiVersion: web.helmapp.io/v1alpha1\nkind: Nginx\nmetadata:\n  name: %s%s\nspec:\n  replicaCount: 1\n", name, labels)
		}
	}
	e.apply("nginxes", manifest.String())
	for _, shard := range []string{"a", "rest"} {
		for _, n := range names[shard] {
			e.waitCondition(n, "Ready")
		}
	}

	// Shard a is killed: the rest goes on, and upgrades one of its own.
	if err := ops["a"].Kill(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.kubectl("patch", "nginx", "sr-0", "--type=merge", "-p", `{"spec":{"replicaCount":2}}`)
	e.kubectl("wait", "--for=jsonpath={.status.deployedRelease.revision}=2", "--timeout="+deadline.String(), "nginx/sr-0")
	for _, n := range names["a"] {
		e.waitCondition(n, "Ready") // still served, on their release
	}

	// Restarted, shard a recovers its own: a change made while it was down
	// is acted on.
	e.kubectl("patch", "nginx", "sa-0", "--type=merge", "-p", `{"spec":{"replicaCount":2}}`)
	start("a")
	e.kubectl("wait", "--for=jsonpath={.status.deployedRelease.revision}=2", "--timeout="+deadline.String(), "nginx/sa-0")
	for _, shard := range []string{"a", "rest"} {
		for _, n := range names[shard] {
			e.waitCondition(n, "Ready")
		}
	}
	for _, n := range append(names["a"][1:], names["rest"][1:]...) {
		e.kubectl("wait", "--for=jsonpath={.status.deployedRelease.revision}=1", "--timeout=10s", "nginx/"+n)
	}

	// The audit log: each process touched only its own resources' objects.
	byUser := auditEvents(t, e.ns)
	for shard, user := range users {
		own := map[string]bool{}
		for _, ev := range byUser[user] {
			switch s := shardOf(ev.ObjectRef.Name); {
			case s == "":
			case s != shard:
				t.Errorf("shard %s's operator (%s) did %s %s %s, of the other shard", shard, user, ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name)
			case ev.ObjectRef.Resource == "nginxes" && ev.Verb == "patch" || ev.ObjectRef.Resource == "nginxes" && ev.Verb == "update":
				own[ev.ObjectRef.Name] = true
			}
		}
		if len(own) != len(names[shard]) {
			t.Errorf("shard %s's operator wrote %d of its %d resources (%v)", shard, len(own), len(names[shard]), own)
		}
	}
}
