package reconciler_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	hopstorage "github.com/operator-framework/helm-operator-plugins/pkg/storage"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

var bulkyGVK = schema.GroupVersionKind{Group: "test.helmapp.io", Version: "v1", Kind: "Bulky"}

// bigBlob is the incompressible file of the big chart: a revision stores it
// twice (the chart's file, base64 in the JSON, and the rendered manifest),
// well over 1 MiB as Helm encodes it, while the ConfigMap holding it stays
// under the API server's 1 MiB.
const bigBlob = 700 << 10

// bulkyChart writes a chart to a new directory: a ConfigMap <release>-blob
// holding a random file of blobSize bytes, and a ConfigMap <release> with
// the value note. Generated at test time, so no big file is committed.
func bulkyChart(t *testing.T, blobSize int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bulky")
	raw := make([]byte, blobSize*3/4)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: bulky\nversion: 0.1.0\n",
		"blob.txt":   base64.StdEncoding.EncodeToString(raw),
		"templates/configmaps.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-blob
data:
  blob: {{ .Files.Get "blob.txt" | quote }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  note: {{ .Values.note | default "none" | quote }}
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bulkyWatches is a watches file for the Bulky kind released from chart,
// with more fields (e.g. "storage: chunked").
func bulkyWatches(t *testing.T, chart string, more string) string {
	if more != "" {
		more = ", " + more
	}
	return tu.WatchesFile(t, "- {group: test.helmapp.io, version: v1, kind: Bulky, chart: "+chart+more+"}\n")
}

// By default a revision too large for a Secret fails before anything is
// applied: ReleaseTooLarge, stalled for the generation, with the encoded
// size, the limit and the option in the message; no object, no revision.
func TestReleaseTooLargeForASecret(t *testing.T) {
	t.Parallel()
	e := newEnvWatching(t, bulkyWatches(t, bulkyChart(t, bigBlob), ""))
	cr := e.create(bulkyGVK, "b", map[string]any{"note": "one"})
	u := e.wait(bulkyGVK, "b", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseTooLarge)
	expect(t, u, "Ready=False/ReleaseTooLarge", "ReleaseFailed=True/ReleaseTooLarge", "Reconciling=False/Stalled",
		"Deployed=False/NotDeployed")
	msg := conditionMessage(u, status.TypeReleaseFailed)
	for _, want := range []string{"Install of release b failed: the revision is ", " bytes as Helm stores it (sh.helm.release.v1.b.v1), over the 1048576 bytes a Secret holds",
		"set `storage: chunked` on this kind's entry in watches.yaml"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ReleaseFailed message %q does not say %q", msg, want)
		}
	}
	if f, _ := nested(u, "status", "failedRelease", "reason").(string); f != status.ReasonReleaseTooLarge {
		t.Errorf("failedRelease.reason = %q", f)
	}
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventInstallFailed)
	for _, name := range []string{"b", "b-blob"} {
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &corev1.ConfigMap{}); err == nil {
			t.Errorf("ConfigMap %s was applied by an install that could not be stored", name)
		}
	}
	if h := history(t, e.ns, "b"); len(h) != 0 {
		t.Errorf("Helm's storage holds %d revisions, want none", len(h))
	}
	secrets := &corev1.SecretList{}
	if err := e.c.List(context.Background(), secrets, client.InNamespace(e.ns)); err != nil || len(secrets.Items) != 0 {
		t.Errorf("Secrets in the namespace: %d (%v), want none", len(secrets.Items), err)
	}
}

// With storage: chunked the same chart installs, upgrades, survives an
// upgrade killed mid-way, and uninstalls; its records carry the release's
// labels and owner, the storage watch sees them, and no helm CLI lists them.
func TestChunkedStorage(t *testing.T) {
	t.Parallel()
	chart := bulkyChart(t, bigBlob)
	// A reconcile period longer than the test: only the storage watch can
	// notice a lost record.
	e := newEnvWatching(t, bulkyWatches(t, chart, "storage: chunked"), func(c *operator.Config) { c.ReconcilePeriod = time.Hour })
	ctx := context.Background()
	cr := e.create(bulkyGVK, "b", map[string]any{"note": "one"})
	u := e.wait(bulkyGVK, "b", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	expect(t, u, "ResourcesReady=True/AllResourcesCurrent")
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("deployedRelease.revision = %v", rev)
	}

	// Revision 1 is an index Secret named as Helm names it, owned by the
	// resource, labelled as Helm's, and at least one chunk owned by it.
	index := &corev1.Secret{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "sh.helm.release.v1.b.v1"}, index); err != nil {
		t.Fatal(err)
	}
	if index.Type != hopstorage.SecretTypeChunkedIndex || index.Labels["owner"] != release.ChunkedOwner ||
		index.Labels["name"] != "b" || index.Labels["version"] != "1" || index.Labels["status"] != "deployed" {
		t.Errorf("index Secret: type %s, labels %v", index.Type, index.Labels)
	}
	if refs := index.OwnerReferences; len(refs) != 1 || refs[0].UID != cr.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("index Secret's owner references %v, want the resource as controller", refs)
	}
	chunks := chunkSecrets(t, e, "sh.helm.release.v1.b.v1")
	if len(chunks) == 0 {
		t.Errorf("revision 1 has no chunk Secret: it fitted one Secret, the test proves nothing")
	}
	for _, c := range append(chunks, *index) {
		n := 0
		for _, v := range c.Data {
			n += len(v)
		}
		if n > release.SecretDataLimit {
			t.Errorf("Secret %s holds %d bytes", c.Name, n)
		}
	}
	h := chunkedHistory(t, e.ns, "b")
	if len(h) != 1 || h[0].Labels[release.LabelOwnerUID] != string(cr.GetUID()) {
		t.Errorf("chunked history: %d revisions, labels %v", len(h), h[0].Labels)
	}
	if out := e.helm("list", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("helm list shows chunked releases: %s", out)
	}

	// An upgrade.
	e.patchSpec(bulkyGVK, "b", map[string]any{"note": "two"})
	u = e.wait(bulkyGVK, "b", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if got := statuses(chunkedConsistent(t, e.ns, "b", u)); !slices.Equal(got, []helmrelease.Status{helmrelease.StatusSuperseded, helmrelease.StatusDeployed}) {
		t.Errorf("chunked history %v after the upgrade", got)
	}
	e.wantNote("b", "two")

	// An upgrade killed mid-way leaves its revision pending (written before
	// the next operator started): it is unlocked and upgraded over.
	e.stopOp()
	chrt, err := loader.Load(chart)
	if err != nil {
		t.Fatal(err)
	}
	now := helmtime.Now()
	pending := &helmrelease.Release{Name: "b", Namespace: e.ns, Version: 3, Chart: chrt, Config: map[string]any{"note": "three"},
		Info: &helmrelease.Info{Status: helmrelease.StatusPendingUpgrade, FirstDeployed: now, LastDeployed: now, Description: "Preparing upgrade"}}
	if err := chunkedStorage(t, e.ns).Create(pending); err != nil {
		t.Fatal(err)
	}
	e.patchSpec(bulkyGVK, "b", map[string]any{"note": "three"})
	e.stopOp = e.startOp()
	e.waitEvent(cr, corev1.EventTypeWarning, reconciler.EventReleaseUnlocked)
	u = e.wait(bulkyGVK, "b", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if got := statuses(chunkedConsistent(t, e.ns, "b", u)); !slices.Equal(got,
		[]helmrelease.Status{helmrelease.StatusSuperseded, helmrelease.StatusSuperseded, helmrelease.StatusFailed, helmrelease.StatusDeployed}) {
		t.Errorf("chunked history %v after the killed upgrade, want 1-2 superseded, 3 failed (unlocked), 4 deployed", got)
	}
	e.wantNote("b", "three")

	// The storage watch sees chunked records: their loss is noticed at once.
	if err := e.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(e.ns),
		client.MatchingLabels{"owner": release.ChunkedOwner, "name": "b"}); err != nil {
		t.Fatal(err)
	}
	u = e.wait(bulkyGVK, "b", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("deployedRelease.revision = %v after the records were lost; want 1, installed again", rev)
	}

	// Uninstall: every record and chunk goes.
	if err := e.c.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	e.waitGone(bulkyGVK, "b")
	tu.Eventually(t, time.Minute, "the release's Secrets to be gone", func() (bool, string) {
		secrets := &corev1.SecretList{}
		if err := e.c.List(ctx, secrets, client.InNamespace(e.ns), client.MatchingLabels{"owner": release.ChunkedOwner}); err != nil {
			return false, err.Error()
		}
		var names []string
		for _, s := range secrets.Items {
			if s.DeletionTimestamp == nil {
				names = append(names, s.Name)
			}
		}
		return len(names) == 0, fmt.Sprint(names)
	})
	for _, name := range []string{"b", "b-blob"} {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &corev1.ConfigMap{}); err == nil {
			t.Errorf("ConfigMap %s is left after the uninstall", name)
		}
	}
}

// A kind switched from secrets to chunked keeps its releases: the revisions
// stored before are read from Helm's Secrets, the next ones are written
// chunked, and the history runs on across both.
func TestSwitchingToChunkedStorageKeepsReleases(t *testing.T) {
	t.Parallel()
	chart := bulkyChart(t, 1<<10)
	e := newNamespace(t)
	e.launch(bulkyWatches(t, chart, ""), nil)
	cr := e.create(bulkyGVK, "s", map[string]any{"note": "one"})
	e.wait(bulkyGVK, "s", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if h := history(t, e.ns, "s"); len(h) != 1 {
		t.Fatalf("Helm's Secrets hold %d revisions before the switch, want 1", len(h))
	}

	e.stopOp()
	e.launch(bulkyWatches(t, chart, "storage: chunked"), nil)
	// The new operator sees the release: nothing to do until the spec changes.
	e.poke(bulkyGVK, "s")
	u := e.wait(bulkyGVK, "s", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(1) {
		t.Errorf("deployedRelease.revision = %v after the switch, want 1", rev)
	}
	e.patchSpec(bulkyGVK, "s", map[string]any{"note": "two"})
	u = e.wait(bulkyGVK, "s", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
		t.Errorf("deployedRelease.revision = %v after the upgrade, want 2", rev)
	}
	old, chunked := history(t, e.ns, "s"), chunkedHistory(t, e.ns, "s")
	if len(old) != 1 || old[0].Version != 1 || old[0].Info.Status != helmrelease.StatusSuperseded {
		t.Errorf("Helm's Secrets after the switch: %v, want revision 1 superseded", statuses(old))
	}
	if len(chunked) != 1 || chunked[0].Version != 2 || chunked[0].Info.Status != helmrelease.StatusDeployed ||
		chunked[0].Labels[release.LabelOwnerUID] != string(cr.GetUID()) {
		t.Errorf("chunked records after the switch: %v, want revision 2 deployed, the resource's", statuses(chunked))
	}
	e.wantNote("s", "two")

	// Deleting the resource uninstalls across both: nothing is left.
	if err := e.c.Delete(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	// Without a finalizer the records go with the garbage collector, after
	// the resource: wait for them.
	e.waitGone(bulkyGVK, "s")
	tu.Eventually(t, time.Minute, "the records of both storages to be gone", func() (bool, string) {
		h, c := history(t, e.ns, "s"), chunkedHistory(t, e.ns, "s")
		return len(h)+len(c) == 0, fmt.Sprintf("%d Helm and %d chunked revisions are left", len(h), len(c))
	})
}

func (e *env) wantNote(name, note string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, cm); err != nil || cm.Data["note"] != note {
		e.t.Errorf("ConfigMap %s: note %q (%v), want %q", name, cm.Data["note"], err, note)
	}
}

// chunkStorage is the chunked driver as the operator configures it, for
// reading and writing records as the operator would.
func chunkedStorage(t *testing.T, ns string) *storage.Storage {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return storage.Init(hopstorage.NewChunkedSecrets(cs.CoreV1().Secrets(ns), release.ChunkedOwner,
		hopstorage.ChunkedSecretsConfig{ChunkSize: release.ChunkSize}))
}

// chunkedHistory is history for the chunked storage, oldest first.
func chunkedHistory(t *testing.T, ns, name string) []*helmrelease.Release {
	t.Helper()
	h, err := chunkedStorage(t, ns).History(name)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	sort.Slice(h, func(i, j int) bool { return h[i].Version < h[j].Version })
	return h
}

// chunkedConsistent is consistentHistory for the chunked storage.
func chunkedConsistent(t *testing.T, ns, name string, u *unstructured.Unstructured) []*helmrelease.Release {
	t.Helper()
	h := chunkedHistory(t, ns, name)
	deployed := 0
	for _, r := range h {
		if r.Info.Status == helmrelease.StatusDeployed {
			deployed++
			if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(r.Version) {
				t.Errorf("deployedRelease.revision %v, the deployed revision %d", rev, r.Version)
			}
		}
		if r.Info.Status.IsPending() {
			t.Errorf("revision %d is still %s", r.Version, r.Info.Status)
		}
	}
	if deployed != 1 {
		t.Errorf("chunked history %v has %d deployed revisions, want exactly one", statuses(h), deployed)
	}
	return h
}

// chunkSecrets lists the chunk Secrets of the revision key.
func chunkSecrets(t *testing.T, e *env, key string) []corev1.Secret {
	t.Helper()
	list := &corev1.SecretList{}
	if err := e.c.List(context.Background(), list, client.InNamespace(e.ns),
		client.MatchingLabels{"owner": release.ChunkedOwner, "key": key, "type": "chunk"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
