package operator_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

const shardKey = "helmapp.io/shard"

// startShard runs an operator instance for the shard selector sel in ns
// until the test ends, and returns its manager (to look into its caches) and
// its stop.
func startShard(t *testing.T, ns, sel string) (manager.Manager, func()) {
	t.Helper()
	ws, err := watches.Load(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := operator.New(cfg, operator.Config{WatchNamespaces: []string{ns}, MaxConcurrentReconciles: 2,
		ReconcilePeriod: time.Hour, MetricsBindAddress: "0", HealthProbeBindAddress: "0", SkipNameValidation: true,
		WatchLabelSelector: sel}, ws)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("shard %q stopped with an error: %v", sel, err)
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			stop()
		}
	})
	return mgr, stop
}

// releaseRecords returns the labels of the Helm release records of release
// name in ns, by revision name.
func releaseRecords(t *testing.T, c client.Client, ns, name string) map[string]map[string]string {
	t.Helper()
	l := &corev1.SecretList{}
	if err := c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, s := range l.Items {
		out[s.Name] = s.Labels
	}
	return out
}

// deploymentOf returns the Deployment of release name in ns.
func deploymentOf(t *testing.T, c client.Client, ns, name string) (*appsv1.Deployment, string) {
	t.Helper()
	l := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if l.Items[i].Annotations["meta.helm.sh/release-name"] == name {
			return &l.Items[i], ""
		}
	}
	return nil, "no Deployment of release " + name
}

// TestShardsScopeCachesAndHandOver runs two instances, one for shard a and one
// for every resource without a shard, as docs/sharding.md recommends. Each
// deploys only its own resources, its caches hold only its own resources and
// their release records, and the shard label reaches the release records and
// objects. Relabelling a resource moves it to the other instance without an
// uninstall or a new revision: Helm's history keeps its one revision, the
// Deployment keeps its UID, the finalizer stays, and the records and objects
// carry the new shard's label.
func TestShardsScopeCachesAndHandOver(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "shards")

	shardA, _ := startShard(t, ns, shardKey+"=a")
	rest, _ := startShard(t, ns, "!"+shardKey)

	mine := tu.NewCR(tu.NginxGVK, ns, "in-a", map[string]any{"replicaCount": int64(1)})
	mine.SetLabels(map[string]string{shardKey: "a"})
	other := tu.NewCR(tu.NginxGVK, ns, "in-rest", map[string]any{"replicaCount": int64(1)})
	for _, u := range []*unstructured.Unstructured{mine, other} {
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"in-a", "in-rest"} {
		tu.WaitForCondition(t, c, tu.NginxGVK, ns, n, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	}
	wantRevisions(t, ns, map[string]int{"in-a": 1, "in-rest": 1})

	// The shard label is carried to the release records and the objects.
	for rec, l := range releaseRecords(t, c, ns, "in-a") {
		if l[shardKey] != "a" {
			t.Errorf("release record %s has labels %v, want %s=a", rec, l, shardKey)
		}
	}
	for rec, l := range releaseRecords(t, c, ns, "in-rest") {
		if _, ok := l[shardKey]; ok {
			t.Errorf("release record %s has labels %v, want no %s", rec, l, shardKey)
		}
	}
	depA, why := deploymentOf(t, c, ns, "in-a")
	if depA == nil {
		t.Fatal(why)
	}
	if depA.Labels[shardKey] != "a" {
		t.Errorf("Deployment %s has labels %v, want %s=a", depA.Name, depA.Labels, shardKey)
	}

	// Each instance's caches hold only its own resources and release records,
	// named in order (a cache lists in no particular order: comparing its
	// order timed out once with every expected item there).
	cacheHolds := func(m manager.Manager) (string, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(tu.NginxGVK.GroupVersion().WithKind("NginxList"))
		if err := m.GetCache().List(ctx, l, client.InNamespace(ns)); err != nil {
			return "", err
		}
		var names []string
		for _, u := range l.Items {
			names = append(names, "resource "+u.GetName())
		}
		s := &metav1.PartialObjectMetadataList{}
		s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := m.GetCache().List(ctx, s, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: reconciler.ReleaseRecordSelector}); err != nil {
			return "", err
		}
		var records []string
		for _, r := range s.Items {
			records = append(records, "record of "+r.Labels["name"])
		}
		slices.Sort(names)
		slices.Sort(records)
		return strings.Join(append(names, records...), ", "), nil
	}
	wantCache := func(m manager.Manager, which, want string) {
		t.Helper()
		tu.Eventually(t, time.Minute, which+"'s cache to hold "+want, func() (bool, string) {
			got, err := cacheHolds(m)
			if err != nil {
				return false, err.Error()
			}
			return got == want, got
		})
	}
	wantCache(shardA, "shard a", "resource in-a, record of in-a")
	wantCache(rest, "the rest", "resource in-rest, record of in-rest")

	// Moved out of shard a by removing its label: the other instance takes
	// it over, with no uninstall and no new revision.
	before, err := tu.Get(t, c, tu.NginxGVK, ns, "in-a")
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"` + shardKey + `":null}}}`)
	if err := c.Patch(ctx, mine, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 2*time.Minute, "in-a's records and Deployment to lose their shard label", func() (bool, string) {
		for rec, l := range releaseRecords(t, c, ns, "in-a") {
			if _, ok := l[shardKey]; ok {
				return false, "release record " + rec + " still has the shard label"
			}
		}
		d, why := deploymentOf(t, c, ns, "in-a")
		if d == nil {
			return false, why
		}
		if _, ok := d.Labels[shardKey]; ok {
			return false, "Deployment still has the shard label"
		}
		return true, ""
	})
	wantCache(shardA, "shard a", "")
	wantCache(rest, "the rest", "resource in-a, resource in-rest, record of in-a, record of in-rest")
	wantRevisions(t, ns, map[string]int{"in-a": 1, "in-rest": 1})
	d, _ := deploymentOf(t, c, ns, "in-a")
	if d == nil || d.UID != depA.UID {
		t.Errorf("in-a's Deployment was replaced (uid %v, was %s): the handover uninstalled the release", d, depA.UID)
	}
	u := tu.WaitForCondition(t, c, tu.NginxGVK, ns, "in-a", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	// The nginx chart's releases need no finalizer (release.NeedsFinalizer):
	// the handover neither adds nor removes one.
	if got, was := u.GetFinalizers(), before.GetFinalizers(); !slices.Equal(got, was) {
		t.Errorf("in-a's finalizers %v after the handover, were %v", got, was)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestWatchLabelSelectorIsValidated: a bad selector stops the start with a
// one-line error naming the flag.
func TestWatchLabelSelectorIsValidated(t *testing.T) {
	for _, sel := range []string{"helmapp.io/shard in a", "=a", "!!x"} {
		_, err := operator.New(cfg, operator.Config{MaxConcurrentReconciles: 1, WatchLabelSelector: sel,
			MetricsBindAddress: "0", HealthProbeBindAddress: "0", SkipNameValidation: true}, nil)
		if err == nil {
			t.Errorf("selector %q was accepted", sel)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "--watch-label-selector") || strings.Contains(msg, "\n") {
			t.Errorf("selector %q: error %q, want one line naming --watch-label-selector", sel, msg)
		}
	}
}
