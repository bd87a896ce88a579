//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Chaos at N = 100 (issue 20 item 6): a fleet of fleetN releases (fleet_test.go)
// is installed or upgraded while the operator is killed over and over, the
// API server restarted, or the leader of two replicas killed. Afterwards every
// resource is Ready at its generation, Helm's history of each is consistent
// (exactly one deployed revision, the one the status names, none pending),
// and there are no more revisions than the actions needed plus the
// interruptions the test made.

const (
	// chaosConcurrency is the fleet's maxConcurrentReconciles (half the
	// default): a burst of a hundred actions lasts long enough for the
	// faults to land in it, on a fast machine too.
	chaosConcurrency = 4
	// killConcurrency is the same for the tests that kill the operator,
	// whose installs each wait a few seconds for their hook Job (chart
	// hookjob): a hundred of them last about as long as the kills, and a kill
	// cuts some off.
	killConcurrency = 8
	// killEvery and killRounds: the operator is killed every 5 s for 40 s.
	killEvery  = 5 * time.Second
	killRounds = 8
	// killSettle is the pause after a SIGKILL before Helm's storage is read:
	// the requests the killed process had sent are done or dropped by then.
	killSettle = time.Second
)

// The operator is killed with SIGKILL every 5 s for 40 s while a hundred
// resources install, a new process started each time, and then left alone.
// Each install waits for a pre-install hook Job (chart hookjob), so that the
// kills find installs under way.
// After each kill, while no operator runs, the test notes the revisions
// left pending: the installs it cut off. Each of them may cost its release
// one more revision (the next process marks it failed and installs over it);
// nothing else may.
func TestChaosKilledEvery5sDuringInstalls(t *testing.T) {
	e := newEnv(t, "e2e-chaos-kill", watchOptions{hooked: true, hookedChart: "hookjob", maxConcurrentReconciles: killConcurrency})
	names := fleetNames("k")
	in := interruptions{}
	start := time.Now()
	e.applyFleet(names, "1")
	for i := 1; i <= killRounds; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * killEvery)))
		e.kill()
		time.Sleep(killSettle)
		h := e.mustHistories()
		pending := in.notePending(h)
		installed := countAt(h, 1)
		t.Logf("kill %d at %.1fs: %d of %d installed, %d pending", i, time.Since(start).Seconds(), installed, fleetN, pending)
		if i == 1 && installed == fleetN {
			e.fatalf("all %d were installed before the first kill: the kills did not land in the burst", fleetN)
		}
		e.restart()
	}
	if in.total() == 0 {
		e.fatalf("no kill found an install under way: the test cut off no action")
	}
	e.waitFleetConverged(names, "1", fleetBound{
		needed:     1,
		extra:      func(name string) int { return len(in[name]) },
		extraTotal: in.total(),
		why:        fmt.Sprintf("1 install each, plus 1 for each of the %d revisions the kills left pending", in.total()),
	})
}

// During a burst of a hundred upgrades (the spec of every resource changed
// at once), kube-apiserver is restarted twice: first as soon as Helm has
// stored an upgrade's revision, then as soon as a release record is written
// after the first restart. A restart can cut off at most the actions running when it
// begins: one per resource, and no more than maxConcurrentReconciles.
func TestChaosAPIServerRestartsDuringUpgrades(t *testing.T) {
	e := newEnv(t, "e2e-chaos-apiserver", watchOptions{hooked: true, timeout: "2m", maxConcurrentReconciles: chaosConcurrency})
	names := fleetNames("u")
	began := time.Now()
	e.applyFleet(names, "1")
	e.waitFleetConverged(names, "1", fleetBound{needed: 1, extra: func(string) int { return 0 }, why: "1 install each, nothing interrupted"})

	const restarts = 2
	// A watch of the release records, not a poll, sees the burst move: the
	// restart begins within milliseconds of the write, on a fast machine too.
	moved := e.firstWriteAfter(e.mustHistories())
	e.applyFleet(names, "2")
	for i := 1; i <= restarts; i++ {
		e.when(moved, names[0])
		e.restartAPIServer()
		// Nothing is written while kube-apiserver is down: what it stores now
		// is about what it had when the restart began.
		h := e.mustHistories()
		upgraded, pending := countAt(h, 2), interruptions{}.notePending(h)
		t.Logf("restart %d at %.1fs: %d of %d upgraded after it, %d pending", i, time.Since(began).Seconds(), upgraded, fleetN, pending)
		if upgraded == fleetN {
			e.fatalf("all %d were upgraded at restart %d: it did not land in the burst", fleetN, i)
		}
		moved = e.firstWriteAfter(h)
	}
	e.waitFleetConverged(names, "2", fleetBound{
		needed:     2,
		extra:      func(string) int { return restarts },
		extraTotal: restarts * chaosConcurrency,
		why: fmt.Sprintf("an install and an upgrade each, plus at most 1 action cut off by each of the %d restarts, at most %d (maxConcurrentReconciles) per restart",
			restarts, chaosConcurrency),
	})
}

// Two replicas with leader election; the leader is killed with SIGKILL in
// the middle of a hundred installs (each waiting for its hook Job, chart
// hookjob, so that the kill cuts some off), without releasing its Lease. The
// standby takes the Lease over once it expires, unlocks the installs the
// leader left pending and finishes the burst. The test
// logs how long the takeover took (a figure, not an assertion), with the
// leader election timings a user would set for a fast takeover.
func TestChaosLeaderKilledMidBurst(t *testing.T) {
	e := &env{t: t, ns: "e2e-chaos-leader-" + rand.String(5), dir: testDir(t)}
	e.kubectl("create", "namespace", e.ns)
	t.Cleanup(func() {
		if _, err := e.tryKubectl("delete", "namespace", e.ns, "--wait=false"); err != nil {
			t.Errorf("deleting namespace %s: %v", e.ns, err)
		}
	})
	crd := filepath.Join(suite.root, "internal", "reconciler", "testdata", "crds", "test.helmapp.io_hookeds.yaml")
	e.kubectl("apply", "-f", crd)
	e.kubectl("wait", "--for=condition=Established", "crd/hookeds.test.helmapp.io", "--timeout="+deadline.String())
	e.watchesPath = filepath.Join(e.dir, "watches.yaml")
	if err := writeWatches(e.watchesPath, watchOptions{hooked: true, hookedChart: "hookjob", maxConcurrentReconciles: killConcurrency}); err != nil {
		t.Fatal(err)
	}

	const leaseName = "chaos-leader"
	// A takeover within about 8 s of the leader's last renewal instead of
	// controller-runtime's 15 s; a leader that cannot renew for 6 s exits.
	flags := []string{"--leader-elect", "--leader-election-namespace=" + e.ns, "--leader-election-id=" + leaseName,
		"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=6s", "--leader-election-retry-period=1s"}
	var live []*operator
	start := func(role string) *operator {
		log := filepath.Join(e.dir, "operator-"+role+".log")
		op, err := startOperatorAs(e.dir, e.watchesPath, log, e.ns, suite.cp.KubeconfigPath, flags...)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, op)
		t.Logf("%s: pid %d, log %s", role, op.Pid(), log)
		return op
	}
	t.Cleanup(func() {
		for _, op := range live {
			if op.exited() == nil {
				if err := op.stop(); err != nil {
					t.Errorf("%v (log %s)", err, op.logPath)
				}
			}
		}
	})
	t.Cleanup(func() {
		// While the new leader runs, so that it uninstalls the releases.
		if _, err := e.tryKubectl("delete", "hookeds", "--all", "--timeout=90s"); err != nil {
			t.Errorf("deleting the test's resources: %v", err)
		}
	})

	// The first process started is the leader: it is alone when it takes
	// the Lease. The standby starts once it has.
	e.op = start("leader")
	e.logPath = e.op.logPath
	var holder string
	e.eventually(leaseName, "the first process holding the Lease", func(ctx context.Context) (bool, string) {
		l, err := suite.kube.CoordinationV1().Leases(e.ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		return holder != "", "holder " + holder
	})
	standby := start("standby")
	e.eventually(leaseName, "the standby trying to acquire the Lease", func(context.Context) (bool, string) {
		b, err := os.ReadFile(standby.logPath)
		return err == nil && strings.Contains(strings.ToLower(string(b)), "attempting to acquire leader lease"), "its log: " + tail(b)
	})

	names := fleetNames("l")
	e.applyFleet(names, "1")
	var h map[string][]revision
	e.eventually(names[0], "10 of the installs done", func(ctx context.Context) (bool, string) {
		var err error
		if h, err = e.histories(ctx); err != nil {
			return false, err.Error()
		}
		return countAt(h, 1) >= 10, fmt.Sprintf("%d installed", countAt(h, 1))
	})

	leaseGVR := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	killed := &flip{what: "the leader killed", done: make(chan struct{})}
	taken := &flip{what: "the standby holding the Lease", done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	defer cancel()
	go func() {
		defer close(taken.done)
		e.watchObjects(ctx, leaseGVR, metav1.ListOptions{FieldSelector: "metadata.name=" + leaseName},
			func(u *unstructured.Unstructured, deleted bool, at time.Time) bool {
				id, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
				if deleted || id == "" || id == holder {
					return false
				}
				taken.at = at
				return true
			})
	}()

	e.kill()
	killed.at = time.Now()
	close(killed.done)
	time.Sleep(killSettle)
	in := interruptions{}
	h = e.mustHistories()
	pending, installed := in.notePending(h), countAt(h, 1)
	t.Logf("leader killed: %d of %d installed, %d pending", installed, fleetN, pending)
	if installed == fleetN || pending == 0 {
		e.fatalf("%d of %d installed, %d pending when the leader was killed: the kill cut off no install", installed, fleetN, pending)
	}
	written := e.firstWriteAfter(h)
	e.op, e.logPath = standby, standby.logPath

	e.logDelay("leader takeover", killed, taken, names[0])
	e.logDelay("leader kill to the next release written", killed, written, names[0])
	e.waitFleetConverged(names, "1", fleetBound{
		needed:     1,
		extra:      func(name string) int { return len(in[name]) },
		extraTotal: in.total(),
		why:        fmt.Sprintf("1 install each, plus 1 for each of the %d revisions the killed leader left pending", in.total()),
	})
}

// firstWriteAfter records the first moment Helm's storage holds a release
// record that before does not (a new revision, or a status changed), seen
// through a watch of the release Secrets' labels.
func (e *env) firstWriteAfter(before map[string][]revision) *flip {
	seen := map[string]bool{}
	for name, revs := range before {
		for _, r := range revs {
			seen[fmt.Sprintf("%s.v%d=%s", name, r.Version, r.Status)] = true
		}
	}
	f := &flip{what: "a release record written", done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), deadline+time.Minute)
	e.t.Cleanup(cancel)
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	go func() {
		defer close(f.done)
		e.watchObjects(ctx, secrets, metav1.ListOptions{LabelSelector: "owner=helm"},
			func(u *unstructured.Unstructured, deleted bool, at time.Time) bool {
				l := u.GetLabels()
				if deleted || seen[fmt.Sprintf("%s.v%s=%s", l["name"], l["version"], l["status"])] {
					return false
				}
				f.at = at
				return true
			})
	}()
	return f
}

// tail is the end of a log for a failure message.
func tail(b []byte) string {
	s := string(b)
	if len(s) > 400 {
		s = s[len(s)-400:]
	}
	return s
}
