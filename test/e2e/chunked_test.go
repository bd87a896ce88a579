//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	hopstorage "github.com/operator-framework/helm-operator-plugins/pkg/storage"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// bigBlobs is how many incompressible files the big chart carries, and
// blobSize the size of each: the chart is over 1 MiB, and a revision, which
// holds every file twice (the chart and the rendered manifest) gzipped,
// needs more than one chunk; each ConfigMap holding a file stays under the
// API server's 1 MiB.
const (
	bigBlobs = 2
	blobSize = 600 << 10
)

// bigHookedChart writes, at test time (no big file is committed), the
// Hooked kind's chart (internal/reconciler/testdata/charts/hooked: its
// ConfigMap and, with block, a pre-install/pre-upgrade hook Job that never
// completes) plus bigBlobs ConfigMaps <release>-blob-<i> of random data.
func bigHookedChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bighooked")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(suite.root, "internal", "reconciler", "testdata", "charts", "hooked"))); err != nil {
		t.Fatal(err)
	}
	var tmpl strings.Builder
	total := 0
	for i := range bigBlobs {
		raw := make([]byte, blobSize*3/4)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		blob := base64.StdEncoding.EncodeToString(raw)
		total += len(blob)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("blob-%d.txt", i)), []byte(blob), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&tmpl, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-blob-%d\ndata:\n  blob: {{ .Files.Get \"blob-%d.txt\" | quote }}\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "blobs.yaml"), []byte(tmpl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if total <= 1<<20 {
		t.Fatalf("the chart's files are %d bytes, not over 1 MiB", total)
	}
	return dir
}

// With storage: chunked and a chart over 1 MiB, the operator is killed with
// SIGKILL while an upgrade is held in its pre-upgrade hook (revision 2
// pending-upgrade in the chunked storage). Started again with the spec
// fixed, it unlocks revision 2 and upgrades to revision 3: Ready, exactly
// one deployed revision and none pending as the chunked driver reads them,
// every chunk Secret belonging to a revision the history keeps. Deleting
// the resource then leaves no release Secret.
func TestChunkedKilledDuringUpgradeHook(t *testing.T) {
	e := newEnv(t, "e2e-chunked-kill", watchOptions{hooked: true, hookedChart: bigHookedChart(t), hookedStorage: "chunked", timeout: "10m"})
	e.applyHooked("h", "  block: false\n")
	e.waitHookedReady("h")
	if chunks := e.chunks("h"); len(chunks["sh.helm.release.v1.h.v1"]) == 0 {
		e.fatalf("revision 1 has no chunk Secret (%v): it fitted one Secret, the test proves nothing", chunks)
	}
	e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"block":true}}`)
	e.eventually("h", "revision 2 pending-upgrade in the chunked storage, held in its hook Job", func(ctx context.Context) (bool, string) {
		h, err := e.chunkedHistory("h")
		if err != nil {
			return false, err.Error()
		}
		_, jobErr := e.tryKubectl("get", "job", "h-wait")
		return jobErr == nil && slices.Equal(h, []string{"1=deployed", "2=pending-upgrade"}), fmt.Sprintf("history %v, hook job: %v", h, jobErr)
	})

	e.kill()
	e.kubectl("patch", "hooked", "h", "--type=merge", "-p", `{"spec":{"block":false,"data":{"greeting":"again"}}}`)
	e.restart()

	n, rev := e.waitHookedReady("h")
	e.waitEvent("h", "ReleaseUnlocked")
	if rev != 3 {
		e.fatalf("deployedRelease.revision %d, want 3 (an upgrade over the unlocked revision 2)\n%s", rev, n)
	}
	h, err := e.chunkedHistory("h")
	if err != nil {
		e.fatalf("reading the chunked history: %v", err)
	}
	if !slices.Equal(h, []string{"1=superseded", "2=failed", "3=deployed"}) {
		e.t.Errorf("chunked history %v, want 1 superseded, 2 failed (unlocked), 3 deployed", h)
	}
	e.t.Logf("chunked history of h: %v", h)
	if got := e.kubectl("get", "configmap", "h", "-o", "jsonpath={.data.greeting}"); got != "again" {
		e.t.Errorf("the ConfigMap says %q: the upgrade after the unlock did not apply the new spec", got)
	}
	chunks := e.chunks("h")
	for _, key := range []string{"sh.helm.release.v1.h.v1", "sh.helm.release.v1.h.v2", "sh.helm.release.v1.h.v3"} {
		if len(chunks[key]) == 0 {
			e.t.Errorf("revision %s has no chunk Secret: %v", key, chunks)
		}
	}
	if len(chunks) != 3 {
		e.t.Errorf("chunk Secrets of %d revisions (%v), want those of the 3 the history keeps", len(chunks), chunks)
	}
	e.checkOracle(oracleOptions{})

	e.kubectl("delete", "hooked", "h", "--timeout=90s")
	e.eventually("h", "no release Secret left after the uninstall", func(ctx context.Context) (bool, string) {
		list, err := suite.kube.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "owner in (helm," + release.ChunkedOwner + ")"})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return len(names) == 0, fmt.Sprint(names)
	})
}

// chunkedStorage is Helm's storage over the chunked driver as the operator
// configures it (storage: chunked): the helm CLI cannot read these records.
func (e *env) chunkedStorage() *storage.Storage {
	return storage.Init(hopstorage.NewChunkedSecrets(suite.kube.CoreV1().Secrets(e.ns), release.ChunkedOwner,
		hopstorage.ChunkedSecretsConfig{ChunkSize: release.ChunkSize}))
}

// chunkedHistory is release name's history as the chunked driver decodes
// it, "revision=status", oldest first.
func (e *env) chunkedHistory(name string) ([]string, error) {
	rels, err := e.chunkedStorage().History(name)
	if err != nil && !strings.Contains(err.Error(), driver.ErrReleaseNotFound.Error()) {
		return nil, err
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Version < rels[j].Version })
	out := make([]string, 0, len(rels))
	for _, r := range rels {
		out = append(out, fmt.Sprintf("%d=%s", r.Version, r.Info.Status))
	}
	return out, nil
}

// chunks maps the index Secret of each revision of release name to its
// chunk Secrets, and fails the test when a chunk Secret belongs to no index
// Secret, is not owned by it, or is not one the index lists (nothing left
// over from a revision rewritten or deleted), or when an index lists a
// chunk that does not exist.
func (e *env) chunks(name string) map[string][]string {
	e.t.Helper()
	ctx := context.Background()
	indexes, err := suite.kube.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=" + release.ChunkedOwner + ",type=index,name=" + name})
	if err != nil {
		e.fatalf("listing index Secrets: %v", err)
	}
	all, err := suite.kube.CoreV1().Secrets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=" + release.ChunkedOwner + ",type=chunk"})
	if err != nil {
		e.fatalf("listing chunk Secrets: %v", err)
	}
	byKey := map[string]corev1.Secret{}
	listed := map[string]bool{}
	want := map[string][]string{}
	out := map[string][]string{}
	for _, ix := range indexes.Items {
		byKey[ix.Name] = ix
		var extra []string
		if err := json.Unmarshal(ix.Data["extraChunks"], &extra); err != nil {
			e.t.Errorf("index Secret %s: extraChunks: %v", ix.Name, err)
		}
		for _, c := range extra {
			listed[c] = true
		}
		want[ix.Name] = extra
		out[ix.Name] = nil
	}
	for _, c := range all.Items {
		key := c.Labels["key"]
		ix, ok := byKey[key]
		if !strings.HasPrefix(key, "sh.helm.release.v1."+name+".v") {
			continue // another release's
		}
		switch {
		case !ok:
			e.t.Errorf("chunk Secret %s belongs to %s, which has no index Secret: left over", c.Name, key)
		case len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != ix.UID:
			e.t.Errorf("chunk Secret %s is not owned by its index Secret %s: %v", c.Name, key, c.OwnerReferences)
		case !listed[c.Name]:
			e.t.Errorf("chunk Secret %s is not listed by its index Secret %s: left over from an earlier write", c.Name, key)
		}
		out[key] = append(out[key], c.Name)
	}
	for key, extra := range want {
		for _, c := range extra {
			if !slices.Contains(out[key], c) {
				e.t.Errorf("index Secret %s lists chunk %s, which does not exist", key, c)
			}
		}
	}
	return out
}
