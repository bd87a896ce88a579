package operator_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	rel "github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// A reconcile takes a release that the metadata cache of release records
// shows no record of to have no history, without listing it. A cache
// behind the API server is caught: here the helm CLI installed the release
// (revision 1) and the cache's first answer for it is the one from before.
// Helm's install from that view stops when the API server refuses its
// revision 1 record (it exists), before it applies anything; the reconcile
// then lists the history and goes on from it as from a current cache
// (adopting the CLI's release). Nothing of the refused attempt shows: no
// failure condition, no Warning event, no failed revision, the CLI's
// revision 1 untouched by a failure.
func TestStaleRecordsCacheAtInstallIsCaught(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "stale-cache")
	if out, err := cp.Helm(ctx, "install", "late", filepath.Join(tu.RepoRoot(), "helm-charts", "echo"), "-n", ns,
		"--set", "message=one"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	helm := driver.NewSecrets(secretsClient(t, ns))
	cli, err := helm.Get("sh.helm.release.v1.late.v1")
	if err != nil {
		t.Fatal(err)
	}

	stale := &staleRecords{hide: "late"}
	refused := &refusedCreates{}
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns}, func(c *operator.Config) {
		c.WrapRecords = func(r client.Reader) client.Reader { stale.Reader = r; return stale }
		c.WrapStorage = func(d driver.Driver) driver.Driver { return &refusedCreates{Driver: d, log: refused} }
	})
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "late", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	u := tu.WaitForCondition(t, c, tu.EchoGVK, ns, "late", status.TypeDeployed, metav1.ConditionTrue, "")

	if !stale.hid() {
		t.Fatal("the records cache was never asked for the release: the test proves nothing")
	}
	if got := refused.keys(); len(got) != 1 || got[0] != "sh.helm.release.v1.late.v1" {
		t.Fatalf("creates refused as existing: %v, want the one of revision 1 (the install from the stale view)", got)
	}
	conds, _, _ := unstructuredConditions(u)
	for _, cond := range conds {
		if (cond.Type == status.TypeReleaseFailed && cond.Status == metav1.ConditionTrue) ||
			(cond.Reason != "NoReconcileError" && (strings.HasSuffix(cond.Reason, "Error") || strings.HasSuffix(cond.Reason, "Failed"))) {
			t.Errorf("condition %s=%s reason %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	hist, err := helm.Query(map[string]string{"name": "late", "owner": "helm"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hist {
		if r.Info.Status == release.StatusFailed {
			t.Errorf("revision %d failed: %s", r.Version, r.Info.Description)
		}
		if r.Version == 1 && (r.Info.Description != cli.Info.Description || !r.Info.FirstDeployed.Equal(cli.Info.FirstDeployed) ||
			r.Config["message"] != "one") {
			t.Errorf("the CLI's revision 1 changed: %q %v", r.Info.Description, r.Config)
		}
	}
	var events corev1.EventList
	tu.Eventually(t, 30*time.Second, "an event about the resource", func() (bool, string) {
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "late" && e.InvolvedObject.Kind == "Echo" {
				return true, ""
			}
		}
		return false, "none yet"
	})
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Errorf("Warning event %s: %s", e.Reason, e.Message)
		}
	}
}

// unstructuredConditions reads status.conditions of u.
func unstructuredConditions(u interface{ UnstructuredContent() map[string]any }) ([]metav1.Condition, bool, error) {
	st, _ := u.UnstructuredContent()["status"].(map[string]any)
	raw, _ := st["conditions"].([]any)
	var out []metav1.Condition
	for _, r := range raw {
		m, _ := r.(map[string]any)
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, metav1.Condition{Type: s("type"), Status: metav1.ConditionStatus(s("status")), Reason: s("reason"), Message: s("message")})
	}
	return out, len(out) > 0, nil
}

// staleRecords is the metadata cache of release records, whose first answer
// for release hide is from before its records existed (no record), as a
// cache behind the API server answers.
type staleRecords struct {
	client.Reader
	hide string
	mu   sync.Mutex
	done bool
}

func (s *staleRecords) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	l, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok {
		return nil
	}
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.FieldSelector == nil || !strings.Contains(o.FieldSelector.String(), "="+s.hide) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		l.Items = nil
	}
	return nil
}

func (s *staleRecords) hid() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// refusedCreates is the real storage driver, noting the creates the API
// server refused as existing; it passes release.NoHistoryAssumer down.
type refusedCreates struct {
	driver.Driver
	log *refusedCreates
	mu  sync.Mutex
	got []string
}

func (r *refusedCreates) Create(key string, rls *release.Release) error {
	err := r.Driver.Create(key, rls)
	if errors.Is(err, driver.ErrReleaseExists) {
		r.log.mu.Lock()
		r.log.got = append(r.log.got, key)
		r.log.mu.Unlock()
	}
	return err
}

func (r *refusedCreates) AssumeNoHistory(name string) bool {
	a, ok := r.Driver.(rel.NoHistoryAssumer)
	return ok && a.AssumeNoHistory(name)
}

func (r *refusedCreates) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// The same stale cache while the helm CLI's install is still under way
// (its revision 1 pending-install, written after the operator started):
// the refused attempt is no action of this operator, so the pending
// revision is not taken for one it left and unlocked; the resource waits
// for the lock, as over a current cache, and the CLI's revision stays
// pending-install.
func TestStaleRecordsCacheDoesNotUnlockAnInstallUnderWay(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "stale-pending")
	stale := &staleRecords{hide: "busy"}
	refused := &refusedCreates{}
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns}, func(c *operator.Config) {
		c.WrapRecords = func(r client.Reader) client.Reader { stale.Reader = r; return stale }
		c.WrapStorage = func(d driver.Driver) driver.Driver { return &refusedCreates{Driver: d, log: refused} }
	})
	// What the CLI's install writes first, after the operator started.
	time.Sleep(1100 * time.Millisecond) // the record's time is in seconds: after the operator's start
	helm := driver.NewSecrets(secretsClient(t, ns))
	pending := storedRelease(t, "busy", 1, release.StatusPendingInstall, false)
	pending.Labels = nil
	pending.Info.Description = "Initial install underway"
	pending.Info.FirstDeployed = helmtime.Now()
	pending.Info.LastDeployed = pending.Info.FirstDeployed
	if err := helm.Create("sh.helm.release.v1.busy.v1", pending); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "busy", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the resource waiting for the CLI's lock", func() (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(tu.EchoGVK)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "busy"}, u); err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructuredConditions(u)
		for _, cond := range conds {
			if cond.Reason == status.ReasonReleaseLocked {
				return true, ""
			}
		}
		return false, fmt.Sprint(conds)
	})
	if !stale.hid() {
		t.Fatal("the records cache was never asked for the release: the test proves nothing")
	}
	if got := refused.keys(); len(got) != 1 || got[0] != "sh.helm.release.v1.busy.v1" {
		t.Fatalf("creates refused as existing: %v, want the one of revision 1", got)
	}
	r, err := helm.Get("sh.helm.release.v1.busy.v1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Info.Status != release.StatusPendingInstall || r.Info.Description != "Initial install underway" {
		t.Errorf("the CLI's revision 1 under way is now %s: %s", r.Info.Status, r.Info.Description)
	}
}

// collision is a `helm upgrade` by hand that lands just before the
// operator's first create of record key: its revision (the one before it
// superseded, the values "by hand") is written by Helm's own Secrets
// driver, cli, and the API server then refuses the operator's create as
// existing.
type collision struct {
	cli  driver.Driver
	key  string
	mu   sync.Mutex
	done bool
	err  error
}

// collidingCreates is the operator's real storage driver, with c's
// collision at its create of c.key; it passes release.NoHistoryAssumer
// down.
type collidingCreates struct {
	driver.Driver
	c *collision
}

func (d *collidingCreates) Create(key string, rls *release.Release) error {
	c := d.c
	c.mu.Lock()
	first := key == c.key && !c.done
	c.done = c.done || first
	c.mu.Unlock()
	if first {
		if err := c.byHand(rls.Name, rls.Version); err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
		}
	}
	return d.Driver.Create(key, rls)
}

func (d *collidingCreates) AssumeNoHistory(name string) bool {
	a, ok := d.Driver.(rel.NoHistoryAssumer)
	return ok && a.AssumeNoHistory(name)
}

// byHand writes what `helm upgrade name --set message="by hand"` writes:
// revision version, deployed, and the one before it superseded.
func (c *collision) byHand(name string, version int) error {
	prevKey := fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version-1)
	prev, err := c.cli.Get(prevKey)
	if err != nil {
		return err
	}
	next := *prev
	next.Version = version
	next.Config = map[string]any{"message": "by hand"}
	next.Info = &release.Info{FirstDeployed: prev.Info.FirstDeployed, LastDeployed: helmtime.Now(), Status: release.StatusDeployed,
		Description: "by hand"}
	if err := c.cli.Create(c.key, &next); err != nil {
		return err
	}
	prev.Info.Status = release.StatusSuperseded
	return c.cli.Update(prevKey, prev)
}

func (c *collision) happened() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done, c.err
}

// An upgrade whose revision someone else wrote between the operator's read
// and its write (a `helm upgrade` by hand, landing first) is refused by the
// API server at Helm's first write, before anything is applied: the
// operator's view was stale, not its upgrade wrong. The reconcile reads the
// history again and goes on from it in the same pass: the revision by hand
// is undone by an upgrade to the spec (revision 3), and nothing of the
// refused attempt shows — no UpgradeFailed event, no failed revision, no
// failure condition.
func TestUpgradeCollidingWithARevisionByHandIsRunAgain(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "collide")
	helm := driver.NewSecrets(secretsClient(t, ns))
	hand := &collision{cli: helm, key: "sh.helm.release.v1.web.v2"}
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns}, func(c *operator.Config) {
		c.WrapStorage = func(d driver.Driver) driver.Driver { return &collidingCreates{Driver: d, c: hand} }
	})
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "web", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	u, err := tu.Get(t, c, tu.EchoGVK, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "two", "spec", "message"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	u = tu.WaitForCondition(t, c, tu.EchoGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)

	if done, err := hand.happened(); !done || err != nil {
		t.Fatalf("the upgrade by hand did not land before the operator's create (%v): the test proves nothing", err)
	}
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision"); rev != 3 {
		t.Errorf("deployedRelease.revision %d, want 3: the spec over the revision by hand", rev)
	}
	conds, _, _ := unstructuredConditions(u)
	for _, cond := range conds {
		if cond.Type == status.TypeReleaseFailed && cond.Status == metav1.ConditionTrue {
			t.Errorf("condition %s=%s reason %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	if f, ok, _ := unstructured.NestedMap(u.Object, "status", "failedRelease"); ok {
		t.Errorf("status.failedRelease %v: the refused attempt was no failure of the release", f)
	}
	hist, err := helm.Query(map[string]string{"name": "web", "owner": "helm"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, r := range hist {
		got[r.Version] = fmt.Sprintf("%s %v %s", r.Info.Status, r.Config["message"], r.Info.Description)
	}
	if len(got) != 3 || !strings.HasPrefix(got[1], "superseded one") || got[2] != "superseded by hand by hand" || !strings.HasPrefix(got[3], "deployed two") {
		t.Errorf("Helm's history %v, want 1 superseded (one), 2 superseded (by hand), 3 deployed (two)", got)
	}
	var events corev1.EventList
	tu.Eventually(t, 30*time.Second, "the ForeignRevision event of the revision by hand", func() (bool, string) {
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "web" && e.Reason == "ForeignRevision" {
				return true, ""
			}
		}
		return false, "none yet"
	})
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "web" && e.Type == corev1.EventTypeWarning && e.Reason != "ForeignRevision" {
			t.Errorf("Warning event %s: %s", e.Reason, e.Message)
		}
	}
}
