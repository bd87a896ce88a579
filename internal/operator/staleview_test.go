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
