package operator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/helmapp/helm-app-operator/internal/metrics"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// rolloutChart writes a ConfigMap-only chart of version (Ready as soon as
// it is applied: no pods to schedule, so the order and overlap of 30
// upgrades depend on the operator alone) and a watches file releasing Echo resources from it with the rollout given. With
// failBad, a resource whose message is "bad" renders a ConfigMap name the API
// server refuses: its upgrade fails, with a failed revision in Helm's history.
func rolloutChart(t *testing.T, version string, failBad bool, rollout string) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "cm", "templates"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "cm", "Chart.yaml"), []byte("apiVersion: v2\nname: cm\nversion: "+version+"\n"), 0o644))
	name := "{{ .Release.Name }}"
	if failBad {
		name = `{{ .Release.Name }}{{ if eq .Values.message "bad" }}-Not_A_Name{{ end }}`
	}
	must(os.WriteFile(filepath.Join(dir, "cm", "templates", "cm.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: `+name+`
data:
  message: {{ .Values.message | quote }}
  chart: `+version+"\n"), 0o644))
	w := fmt.Sprintf(`- group: web.helmapp.io
  version: v1alpha1
  kind: Echo
  chart: %s
  maxConcurrentReconciles: 10
  rollout: %s
`, filepath.Join(dir, "cm"), rollout)
	p := filepath.Join(dir, "watches.yaml")
	must(os.WriteFile(p, []byte(w), 0o644))
	return p
}

// TestRolloutStagesChartUpgrades restarts the operator on a changed chart
// over 30 resources with rollout.maxUnavailable 5: Helm's history and the
// events show no more than 5 upgrades in flight at once, the waiting
// resources stay Ready with ChartUpgradePending=True AwaitingRollout, and all
// 30 end on the new chart with one deployed revision each. Then a chart that
// fails for one resource's values halts the rollout (maxFailures 1): the rest
// keep the old chart, revision 2 only, and show RolloutHalted naming it; a
// user's spec change goes ahead meanwhile; fixing the failed resource
// resumes the rollout until all are on the new chart.
func TestRolloutStagesChartUpgrades(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "rollout")
	const n = 30
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("r%02d", i)
	}

	stop := runOperator(t, rolloutChart(t, "0.1.0", false, "{maxUnavailable: 5, maxFailures: 1}"), ns)
	for i, name := range names {
		msg := "hello " + name
		if i == 0 {
			msg = "bad" // fine for 0.1.0 and 0.2.0, refused by 0.3.0
		}
		if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, name, map[string]any{"message": msg})); err != nil {
			t.Fatal(err)
		}
	}
	waitOnChart(t, c, ns, names, "0.1.0")
	stop()
	wantRevisions(t, ns, revisions(names, 1))

	// A new operator with chart 0.2.0: at most 5 in flight at once.
	seen := watchRollout(t, ns)
	stop = runOperator(t, rolloutChart(t, "0.2.0", false, "{maxUnavailable: 5, maxFailures: 1}"), ns)
	waitOnChart(t, c, ns, names, "0.2.0")
	stop()
	wantRevisions(t, ns, revisions(names, 2))
	// Each revision 2 says why: the chart, admitted by the rollout (issue 42).
	for _, name := range names {
		u, err := tu.Get(t, c, tu.EchoGVK, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		h, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
		want := "ChartChanged: chart 0.1.0→0.2.0, admitted by the staged rollout"
		if len(h) == 0 || fmt.Sprint(h[0].(map[string]any)["revision"]) != "2" ||
			fmt.Sprint(h[0].(map[string]any)["causes"]) != fmt.Sprint([]any{map[string]any{"type": "ChartChanged", "detail": strings.TrimPrefix(want, "ChartChanged: ")}}) {
			t.Errorf("%s: status.history %v, want revision 2 first with %q", name, h, want)
		}
	}
	if got := maxInFlight(t, ctx, c, ns, names, 2); got > 5 || got < 1 {
		t.Errorf("%d upgrades were in flight at once, want 1 to 5", got)
	}
	waited, maxProgress := seen()
	if len(waited) == 0 || maxProgress > 5 {
		t.Errorf("statuses: %d resources showed AwaitingRollout, at most %d in progress; want some, and at most 5", len(waited), maxProgress)
	}
	// The metric counts per kind and state, not per resource.
	if got := rolloutMetric(t); got["upgraded"] != n || got["waiting"] != 0 || got["in_progress"] != 0 || got["failed"] != 0 {
		t.Errorf("helmapp_rollout_resources{kind=\"Echo\"} = %v, want all %d upgraded", got, n)
	}
	for _, r := range []string{status.ReasonRolloutStarted, status.ReasonRolloutCompleted} {
		if got := eventsOf(t, ctx, c, ns, "", r); len(got) != 1 {
			t.Errorf("%d %s events, want 1: %v", len(got), r, got)
		}
	}

	// Chart 0.3.0 fails for r00's values; one at a time, halted by one
	// failure: r00 goes first (by name), fails, and nobody else starts.
	stop = runOperator(t, rolloutChart(t, "0.3.0", true, "{maxUnavailable: 1, maxFailures: 1}"), ns)
	defer stop()
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "r00", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	for _, name := range names[1:] {
		u := tu.WaitForCondition(t, c, tu.EchoGVK, ns, name, status.TypeChartUpgradePending, metav1.ConditionTrue, status.ReasonRolloutHalted)
		if m := tu.Condition(u, status.TypeChartUpgradePending).Message; !strings.Contains(m, ns+"/r00") {
			t.Errorf("%s: RolloutHalted does not name %s/r00: %q", name, ns, m)
		}
		if !tu.ConditionIs(u, status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful) {
			t.Errorf("%s waits but is not Ready: %s", name, tu.Describe(u))
		}
	}
	wantRevisions(t, ns, revisions(names[1:], 2))
	if got := eventsOf(t, ctx, c, ns, "r00", status.ReasonRolloutHalted); len(got) != 1 {
		t.Errorf("%d RolloutHalted events on r00, want 1", len(got))
	}

	// A user's spec change goes ahead at once, halted or not.
	tu.PatchSpec(t, c, tu.EchoGVK, ns, "r20", map[string]any{"message": "changed"})
	waitOnChart(t, c, ns, []string{"r20"}, "0.3.0")
	if u, _ := tu.Get(t, c, tu.EchoGVK, ns, "r20"); tu.Condition(u, status.TypeChartUpgradePending) != nil {
		t.Errorf("r20 is upgraded but still shows ChartUpgradePending: %s", tu.Describe(u))
	}
	others := append(append([]string{}, names[1:20]...), names[21:]...)
	wantRevisions(t, ns, revisions(others, 2))

	// Fixing r00 resumes the rollout: all end on 0.3.0, one deployed revision each.
	tu.PatchSpec(t, c, tu.EchoGVK, ns, "r00", map[string]any{"message": "fixed"})
	waitOnChart(t, c, ns, names, "0.3.0")
	wantRevisions(t, ns, revisions(names[1:], 3))
	for _, name := range names {
		u, err := tu.Get(t, c, tu.EchoGVK, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if tu.Condition(u, status.TypeChartUpgradePending) != nil {
			t.Errorf("%s: ChartUpgradePending left after the rollout: %s", name, tu.Describe(u))
		}
	}
	h, err := helmStorage(t, ns).History("r00")
	if err != nil {
		t.Fatal(err)
	}
	deployed := 0
	for _, r := range h {
		if r.Info.Status == "deployed" {
			deployed++
		}
	}
	if deployed != 1 {
		t.Errorf("r00 has %d deployed revisions, want 1", deployed)
	}
}

// rolloutMetric reads helmapp_rollout_resources of kind Echo by state.
func rolloutMetric(t *testing.T) map[string]int {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range families {
		if f.GetName() != metrics.RolloutResources {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if len(l) != 2 {
				t.Errorf("series with labels %v, want kind and state only", l)
			}
			if l["kind"] == "Echo" {
				out[l["state"]] = int(m.GetGauge().GetValue())
			}
		}
	}
	return out
}

// revisions wants n revisions for each name.
func revisions(names []string, n int) map[string]int {
	m := map[string]int{}
	for _, name := range names {
		m[name] = n
	}
	return m
}

// waitOnChart waits until each resource is Ready at its generation with
// chart version deployed and nothing pending.
func waitOnChart(t *testing.T, c client.Client, ns string, names []string, version string) {
	t.Helper()
	for _, name := range names {
		tu.Eventually(t, 3*time.Minute, name+" Ready on chart "+version, func() (bool, string) {
			u, err := tu.Get(t, c, tu.EchoGVK, ns, name)
			if err != nil {
				return false, err.Error()
			}
			v, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "chartVersion")
			og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			r := tu.Condition(u, status.TypeReady)
			return v == version && og == u.GetGeneration() && r != nil && r.Status == metav1.ConditionTrue &&
				tu.Condition(u, status.TypeChartUpgradePending) == nil, tu.Describe(u)
		})
	}
}

// maxInFlight is the most upgrades to revision rev that overlapped, each
// from the time Helm recorded its start (the revision's last-deployed time)
// to its UpgradeSucceeded event, both on the operator's clock. The event is
// emitted before the status that makes the resource Ready, which the next
// upgrade waits for, so these spans are within the true ones: an overlap
// here is a real one.
func maxInFlight(t *testing.T, ctx context.Context, c client.Client, ns string, names []string, rev int) int {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, name := range names {
		h, err := helmStorage(t, ns).Get(name, rev)
		if err != nil {
			t.Fatalf("revision %d of %s: %v", rev, name, err)
		}
		start := h.Info.LastDeployed.Time
		var end time.Time
		for _, e := range eventsOf(t, ctx, c, ns, name, reconciler.EventUpgradeSucceeded) {
			if strings.Contains(e.Note, "to revision "+strconv.Itoa(rev)+" ") {
				end = e.EventTime.Time
			}
		}
		if end.IsZero() || !end.After(start) {
			t.Fatalf("%s: upgrade to revision %d started %s, UpgradeSucceeded event at %s", name, rev, start, end)
		}
		edges = append(edges, edge{start, 1}, edge{end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	most, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}

// eventsOf lists the events of reason on the resource name ("" for any).
func eventsOf(t *testing.T, ctx context.Context, c client.Client, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	var evs eventsv1.EventList
	if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range evs.Items {
		if e.Reason == reason && (name == "" || e.Regarding.Name == name) {
			out = append(out, e)
		}
	}
	return out
}

var inProgress = regexp.MustCompile(`(\d+) in progress`)

// watchRollout watches the Echo resources of ns and returns a function that
// stops watching and tells which resources showed AwaitingRollout, and the
// most upgrades in progress any ChartUpgradePending message counted.
func watchRollout(t *testing.T, ns string) func() (map[string]bool, int) {
	t.Helper()
	wc := tu.WatchClient(t, cfg)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(tu.EchoGVK.GroupVersion().WithKind("EchoList"))
	w, err := wc.Watch(context.Background(), list, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	waited, most := map[string]bool{}, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Error {
				continue
			}
			if cond := tu.Condition(u, status.TypeChartUpgradePending); cond != nil && cond.Status == metav1.ConditionTrue {
				mu.Lock()
				if cond.Reason == status.ReasonAwaitingRollout {
					waited[u.GetName()] = true
				}
				if m := inProgress.FindStringSubmatch(cond.Message); m != nil {
					v, _ := strconv.Atoi(m[1])
					most = max(most, v)
				}
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { w.Stop(); <-done }) }
	t.Cleanup(stop)
	return func() (map[string]bool, int) {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return waited, most
	}
}

// TestRolloutResumesOnRetry: a resource fails on the new chart for a reason
// outside its spec (a ConfigMap the new chart adds already exists, not
// Helm's, so Helm stores no revision for the attempt) and, with maxRetries
// 1, stalls; the rollout halts. Removing the
// cause is not enough, nothing retries a stalled resource; the annotation
// helmapp.io/retry does, and its success resumes the rollout.
func TestRolloutResumesOnRetry(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "rolloutretry")
	names := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	watchesOf := func(version string, extra bool) string {
		p := rolloutChart(t, version, false, "{maxUnavailable: 1, maxFailures: 1}\n  maxRetries: 1")
		if extra {
			tmpl := filepath.Join(filepath.Dir(p), "cm", "templates", "extra.yaml")
			if err := os.WriteFile(tmpl, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	stop := runOperator(t, watchesOf("0.1.0", false), ns)
	for _, name := range names {
		if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, name, map[string]any{"message": "hello"})); err != nil {
			t.Fatal(err)
		}
	}
	waitOnChart(t, c, ns, names, "0.1.0")
	stop()

	// Someone else's ConfigMap where 0.2.0 puts s0's new one.
	blocker := &unstructured.Unstructured{}
	blocker.SetAPIVersion("v1")
	blocker.SetKind("ConfigMap")
	blocker.SetNamespace(ns)
	blocker.SetName("s0-extra")
	if err := c.Create(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	stop = runOperator(t, watchesOf("0.2.0", true), ns)
	defer stop()
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "s0", status.TypeStalled, metav1.ConditionTrue, status.ReasonRetriesExhausted)
	for _, name := range names[1:] {
		tu.WaitForCondition(t, c, tu.EchoGVK, ns, name, status.TypeChartUpgradePending, metav1.ConditionTrue, status.ReasonRolloutHalted)
	}
	if err := c.Delete(ctx, blocker); err != nil {
		t.Fatal(err)
	}
	// Still halted: nothing retries a stalled resource on its own. The
	// operator is given a reconcile of every waiting resource to prove it.
	for _, name := range names[1:] {
		patchAnnotation(t, c, ns, name, "example.com/poke", "1")
	}
	for _, name := range names[1:] {
		tu.Eventually(t, time.Minute, name+" reconciled after the poke", func() (bool, string) {
			u, err := tu.Get(t, c, tu.EchoGVK, ns, name)
			if err != nil {
				return false, err.Error()
			}
			cond := tu.Condition(u, status.TypeChartUpgradePending)
			og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			return cond != nil && cond.Reason == status.ReasonRolloutHalted && og == u.GetGeneration(), tu.Describe(u)
		})
	}
	wantRevisions(t, ns, revisions(names[1:], 1))

	patchAnnotation(t, c, ns, "s0", "helmapp.io/retry", "1")
	waitOnChart(t, c, ns, names, "0.2.0")
	wantRevisions(t, ns, revisions(names[1:], 2))
	// Helm refuses to adopt the ConfigMap before it stores the revision:
	// the failure that halted the rollout left none (status.failedRelease
	// says so), and the retry is revision 2.
	wantRevisions(t, ns, map[string]int{"s0": 2})
}

// patchAnnotation sets the annotation key on the Echo resource name.
func patchAnnotation(t *testing.T, c client.Client, ns, name, key, value string) {
	t.Helper()
	u := tu.NewCR(tu.EchoGVK, ns, name, nil)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := c.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
