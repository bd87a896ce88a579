package storage_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hopstorage "github.com/operator-framework/helm-operator-plugins/pkg/storage"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/storage"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// storedRelease is a release as Helm stores it: the echo chart whole
// (templates, values, schema), values, a manifest, a hook that ran, custom
// labels, and timestamps with nanoseconds. big adds a manifest of random
// text, which compresses into many deflate blocks.
func storedRelease(t *testing.T, name string, version int, status release.Status, big bool) *release.Release {
	t.Helper()
	ch, err := loader.Load(filepath.Join(tu.RepoRoot(), "helm-charts", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	at := helmtime.Time{Time: time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC)}
	manifest := "---\n# Source: echo/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	if big {
		rnd := rand.New(rand.NewSource(int64(version)))
		b := make([]byte, 300<<10)
		rnd.Read(b)
		manifest += "data:\n  noise: " + base64.StdEncoding.EncodeToString(b) + "\n"
	}
	return &release.Release{
		Name: name, Namespace: "somewhere", Version: version, Chart: ch,
		Config:   map[string]any{"message": "héllo \u2603 <&>", "replicas": 3, "nested": map[string]any{"on": true}},
		Manifest: manifest,
		Info: &release.Info{FirstDeployed: at, LastDeployed: at, Status: status, Description: "Install complete",
			Notes: "Thank you for installing echo."},
		Hooks: []*release.Hook{{Name: name + "-check", Kind: "Pod", Path: "echo/templates/check.yaml",
			Manifest: "apiVersion: v1\nkind: Pod\n", Events: []release.HookEvent{release.HookPostInstall},
			LastRun:        release.HookExecution{StartedAt: at, CompletedAt: at, Phase: release.HookPhaseSucceeded},
			DeletePolicies: []release.HookDeletePolicy{release.HookBeforeHookCreation}}},
		Labels: map[string]string{"helmapp.io/chart-digest": "0123abcd", "team": "web"},
	}
}

func secretsClient(t *testing.T, ns string) corev1client.SecretInterface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().Secrets(ns)
}

func getSecret(t *testing.T, sc corev1client.SecretInterface, key string) *corev1.Secret {
	t.Helper()
	s, err := sc.Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameRecord compares what a storage driver wrote: the type, the data
// (byte for byte) and the labels.
func sameRecord(t *testing.T, what string, helm, ours *corev1.Secret) {
	t.Helper()
	if helm.Type != ours.Type {
		t.Errorf("%s: type %q, Helm's %q", what, ours.Type, helm.Type)
	}
	if len(helm.Data) != 1 || len(ours.Data) != 1 || !bytes.Equal(helm.Data["release"], ours.Data["release"]) {
		t.Errorf("%s: data differs from Helm's (%d keys, release %d bytes; Helm's %d keys, %d bytes)",
			what, len(ours.Data), len(ours.Data["release"]), len(helm.Data), len(helm.Data["release"]))
	}
	if !maps.Equal(helm.Labels, ours.Labels) {
		t.Errorf("%s: labels %v, Helm's %v", what, ours.Labels, helm.Labels)
	}
}

// stampOf is the Unix time of a time label Helm's driver set, the one
// thing of a record that depends on when it was written.
func stampOf(t *testing.T, s *corev1.Secret, label string) time.Time {
	t.Helper()
	sec, err := strconv.ParseInt(s.Labels[label], 10, 64)
	if err != nil {
		t.Fatalf("label %s of %s: %v", label, s.Name, err)
	}
	return time.Unix(sec, 0)
}

// The operator's Secrets driver writes what Helm's own driver writes for
// the same release, byte for byte: the same Secret name and type, the same
// data (base64 of the gzipped JSON) and the same labels, on a create and
// on Helm's update of a release read by Query (which keeps createdAt).
// The only thing Helm makes depend on the clock, the createdAt or
// modifiedAt label, is pinned to what Helm's driver stamped. The writer is
// pooled: the second and third records reuse the first one's compressor.
func TestSecretsDriverWritesHelmsRecordsByteForByte(t *testing.T) {
	c := tu.Client(t, cfg)
	helmSC, oursSC := secretsClient(t, tu.Namespace(t, c, "bytes-helm")), secretsClient(t, tu.Namespace(t, c, "bytes-ours"))
	var pinned time.Time
	helm := driver.NewSecrets(helmSC)
	ours := storage.NewHelmSecrets(oursSC, func() time.Time { return pinned })

	for _, tc := range []struct {
		name string
		big  bool
	}{{"web", false}, {"big", true}, {"web2", false}} {
		for v := 1; v <= 2; v++ {
			key := fmt.Sprintf("sh.helm.release.v1.%s.v%d", tc.name, v)
			rel := storedRelease(t, tc.name, v, release.StatusPendingInstall, tc.big)
			if err := helm.Create(key, rel); err != nil {
				t.Fatal(err)
			}
			h := getSecret(t, helmSC, key)
			pinned = stampOf(t, h, "createdAt")
			if err := ours.Create(key, rel); err != nil {
				t.Fatal(err)
			}
			sameRecord(t, "create "+key, h, getSecret(t, oursSC, key))
		}
		// Helm's upgrade: Query the history, mark the last deployed
		// revision superseded (its labels, createdAt among them, come from
		// the Query), update it.
		update := func(d driver.Driver) {
			rels, err := d.Query(map[string]string{"name": tc.name, "owner": "helm"})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rels {
				if r.Version == 1 {
					r.Info.Status = release.StatusSuperseded
					if err := d.Update(fmt.Sprintf("sh.helm.release.v1.%s.v1", tc.name), r); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		key := fmt.Sprintf("sh.helm.release.v1.%s.v1", tc.name)
		update(helm)
		h := getSecret(t, helmSC, key)
		pinned = stampOf(t, h, "modifiedAt")
		update(ours)
		sameRecord(t, "update of a queried "+key, h, getSecret(t, oursSC, key))
		if _, ok := h.Labels["createdAt"]; !ok {
			t.Errorf("Helm's update of a queried record dropped createdAt: %v", h.Labels)
		}
		// Again: the queried labels now hold modifiedAt, which Helm's driver
		// lets win over its own new stamp; ours must too, whatever its clock.
		update(helm)
		pinned = time.Unix(1, 0)
		update(ours)
		sameRecord(t, "second update of a queried "+key, getSecret(t, helmSC, key), getSecret(t, oursSC, key))
		// Helm's update of a release it built (Get filters the system labels).
		key = fmt.Sprintf("sh.helm.release.v1.%s.v2", tc.name)
		rel := storedRelease(t, tc.name, 2, release.StatusDeployed, tc.big)
		if err := helm.Update(key, rel); err != nil {
			t.Fatal(err)
		}
		h = getSecret(t, helmSC, key)
		pinned = stampOf(t, h, "modifiedAt")
		if err := ours.Update(key, rel); err != nil {
			t.Fatal(err)
		}
		sameRecord(t, "update "+key, h, getSecret(t, oursSC, key))
	}
}

// releaseJSON is a release as a reader sees it: its JSON and its labels.
func releaseJSON(t *testing.T, r *release.Release) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + fmt.Sprint(r.Labels)
}

func releasesJSON(t *testing.T, rs []*release.Release) []string {
	t.Helper()
	var out []string
	for _, r := range rs {
		out = append(out, releaseJSON(t, r))
	}
	slices.Sort(out)
	return out
}

// Each driver reads the other's records as its own: Get, List and Query
// return the same releases (values, labels) from records Helm's driver
// wrote and from records ours wrote, and each deletes the other's record,
// returning the same release.
func TestSecretsDriverReadsHelmsRecordsAndHelmReadsOurs(t *testing.T) {
	c := tu.Client(t, cfg)
	for _, writer := range []string{"helm", "ours"} {
		t.Run("written by "+writer, func(t *testing.T) {
			sc := secretsClient(t, tu.Namespace(t, c, "cross-"+writer))
			helm, ours := driver.Driver(driver.NewSecrets(sc)), storage.NewHelmSecrets(sc, nil)
			w, other := helm, ours
			if writer == "ours" {
				w, other = ours, helm
			}
			for v, st := range []release.Status{release.StatusSuperseded, release.StatusDeployed} {
				if err := w.Create(fmt.Sprintf("sh.helm.release.v1.web.v%d", v+1), storedRelease(t, "web", v+1, st, v == 1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Create("sh.helm.release.v1.other.v1", storedRelease(t, "other", 1, release.StatusDeployed, false)); err != nil {
				t.Fatal(err)
			}
			// A record that does not decode: List and Query skip it, as
			// Helm's do; our Get fails on it (Helm's panics).
			junk := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v9",
				Labels: map[string]string{"name": "web", "owner": "helm", "version": "9", "status": "deployed"}},
				Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("not base64!")}}
			if _, err := sc.Create(context.Background(), junk, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := ours.Get(junk.Name); err == nil || !strings.Contains(err.Error(), "failed to decode data") {
				t.Errorf("Get of an undecodable record: %v", err)
			}
			for v := 1; v <= 2; v++ {
				key := fmt.Sprintf("sh.helm.release.v1.web.v%d", v)
				h, err := helm.Get(key)
				if err != nil {
					t.Fatal(err)
				}
				o, err := ours.Get(key)
				if err != nil {
					t.Fatal(err)
				}
				if releaseJSON(t, h) != releaseJSON(t, o) {
					t.Errorf("Get %s: ours and Helm's differ", key)
				}
				if _, ok := o.Labels["createdAt"]; ok || o.Labels["team"] != "web" {
					t.Errorf("Get %s: labels %v, want the custom labels only", key, o.Labels)
				}
			}
			all := func(*release.Release) bool { return true }
			hl, err := helm.List(all)
			if err != nil {
				t.Fatal(err)
			}
			ol, err := ours.List(all)
			if err != nil {
				t.Fatal(err)
			}
			if len(ol) != 3 || !slices.Equal(releasesJSON(t, hl), releasesJSON(t, ol)) {
				t.Errorf("List: ours %d releases, Helm's %d, or they differ", len(ol), len(hl))
			}
			q := map[string]string{"name": "web", "owner": "helm"}
			hq, err := helm.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			oq, err := ours.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			if len(oq) != 2 || !slices.Equal(releasesJSON(t, hq), releasesJSON(t, oq)) {
				t.Errorf("Query: ours %d releases, Helm's %d, or they differ", len(oq), len(hq))
			}
			if _, err := ours.Query(map[string]string{"name": "none", "owner": "helm"}); err != driver.ErrReleaseNotFound {
				t.Errorf("Query of no release: %v, want Helm's ErrReleaseNotFound", err)
			}
			if _, err := ours.Get("sh.helm.release.v1.none.v1"); err != driver.ErrReleaseNotFound {
				t.Errorf("Get of no record: %v, want Helm's ErrReleaseNotFound", err)
			}
			if err := ours.Create("sh.helm.release.v1.web.v2", storedRelease(t, "web", 2, release.StatusDeployed, false)); err != driver.ErrReleaseExists {
				t.Errorf("Create over an existing record: %v, want Helm's ErrReleaseExists", err)
			}

			want, err := w.Get("sh.helm.release.v1.web.v2")
			if err != nil {
				t.Fatal(err)
			}
			got, err := other.Delete("sh.helm.release.v1.web.v2")
			if err != nil {
				t.Fatal(err)
			}
			if releaseJSON(t, got) != releaseJSON(t, want) {
				t.Errorf("Delete by the other driver returned another release")
			}
			if _, err := w.Get("sh.helm.release.v1.web.v2"); err != driver.ErrReleaseNotFound {
				t.Errorf("after Delete: %v, want ErrReleaseNotFound", err)
			}
		})
	}
}

// A record too large for its Secret is refused before it is sent, with the
// size Helm's encoding has.
func TestSecretsDriverRefusesATooLargeRecordBeforeWriting(t *testing.T) {
	c := tu.Client(t, cfg)
	sc := secretsClient(t, tu.Namespace(t, c, "too-large"))
	rel := storedRelease(t, "huge", 1, release.StatusPendingInstall, false)
	b := make([]byte, 900<<10)
	rand.New(rand.NewSource(1)).Read(b)
	rel.Manifest = base64.StdEncoding.EncodeToString(b)
	err := storage.NewHelmSecrets(sc, nil).Create("sh.helm.release.v1.huge.v1", rel)
	if err == nil || !strings.Contains(err.Error(), "over the 1048576 bytes a Secret holds") {
		t.Fatalf("Create of a 1.2 MB record: %v, want the too-large error", err)
	}
	size, _ := storage.EncodedSize(rel)
	if !strings.Contains(err.Error(), strconv.Itoa(size)) {
		t.Errorf("error %q does not name the encoded size %d", err, size)
	}
	if _, err := sc.Get(context.Background(), "sh.helm.release.v1.huge.v1", metav1.GetOptions{}); err == nil {
		t.Errorf("the too-large record was written")
	}
}

// The helm CLI, v3 and v4, reads the records the operator's driver wrote
// (list, history, get values, get manifest, as Helm's own driver decodes
// them), and `helm upgrade` by the v3 CLI over them works: it marks the
// operator's revision superseded and stores its own, which the operator
// then reads with its driver and undoes (a foreign revision).
func TestHelmCLIReadsAndUpgradesOurRecords(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "cli-records")
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns})
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "echo", map[string]any{"message": "one"})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	stored, err := driver.NewSecrets(secretsClient(t, ns)).Get("sh.helm.release.v1.echo.v1")
	if err != nil {
		t.Fatal(err)
	}

	for name, run := range map[string]func(context.Context, ...string) (string, error){"helm": cp.Helm, "helm4": cp.Helm4} {
		cli := func(args ...string) string {
			t.Helper()
			out, err := run(ctx, append(args, "-n", ns)...)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return out
		}
		var list []struct{ Name, Revision, Status, Chart string }
		if err := json.Unmarshal([]byte(cli("list", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Name != "echo" || list[0].Revision != "1" || list[0].Status != "deployed" || !strings.HasPrefix(list[0].Chart, "echo-") {
			t.Errorf("%s list: %+v, want echo revision 1 deployed", name, list)
		}
		var hist []struct {
			Revision            int
			Status, Description string
		}
		if err := json.Unmarshal([]byte(cli("history", "echo", "-o", "json")), &hist); err != nil {
			t.Fatal(err)
		}
		if len(hist) != 1 || hist[0].Revision != 1 || hist[0].Status != "deployed" || !strings.HasPrefix(hist[0].Description, "SpecChanged: resource created at generation 1") {
			// The operator writes the revision's cause as Helm's description (issue 42).
			t.Errorf("%s history: %+v, want revision 1 deployed (SpecChanged: resource created at generation 1 ...)", name, hist)
		}
		var vals map[string]any
		if err := json.Unmarshal([]byte(cli("get", "values", "echo", "-o", "json")), &vals); err != nil {
			t.Fatal(err)
		}
		if vals["message"] != "one" {
			t.Errorf("%s get values: %v, want message one", name, vals)
		}
		if got := cli("get", "manifest", "echo"); strings.TrimSpace(got) != strings.TrimSpace(stored.Manifest) || !strings.Contains(got, "kind: ConfigMap") {
			t.Errorf("%s get manifest:\n%s\nwant the stored manifest:\n%s", name, got, stored.Manifest)
		}
	}

	if out, err := cp.Helm(ctx, "upgrade", "echo", filepath.Join(tu.RepoRoot(), "helm-charts", "echo"), "-n", ns,
		"--reuse-values", "--set", "message=cli"); err != nil {
		t.Fatalf("helm upgrade over the operator's records: %v\n%s", err, out)
	}
	h := driver.NewSecrets(secretsClient(t, ns))
	cliRev, err := h.Get("sh.helm.release.v1.echo.v2")
	if err != nil {
		t.Fatal(err)
	}
	if cliRev.Config["message"] != "cli" || cliRev.Info.Description != "Upgrade complete" {
		t.Errorf("the CLI's revision 2: values %v, %q", cliRev.Config, cliRev.Info.Description)
	}
	// The operator undoes the CLI's revision with one of its own, over the
	// CLI's record.
	tu.Eventually(t, time.Minute, "the operator's revision 3 over the CLI's", func() (bool, string) {
		r, err := h.Get("sh.helm.release.v1.echo.v3")
		if err != nil {
			return false, err.Error()
		}
		return r.Info.Status == release.StatusDeployed && r.Config["message"] == "one", fmt.Sprintf("%s %v", r.Info.Status, r.Config)
	})
	out, err := cp.Helm4(ctx, "history", "echo", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var hist []struct {
		Revision int
		Status   string
	}
	if err := json.Unmarshal([]byte(out), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].Status != "superseded" || hist[1].Status != "superseded" || hist[2].Status != "deployed" {
		t.Errorf("helm4 history after the CLI's upgrade and the operator's: %+v, want 1, 2 superseded, 3 deployed", hist)
	}
}

// Chunked storage keeps helm-operator-plugins' format (our own driver since
// issue 28): a kind whose watch says chunked writes a revision too large
// for one Secret as that driver's index and chunk Secrets (owner helm-app-operator, never Helm's type),
// which that driver reads back as the same release; Helm-format records
// written before the switch (by our driver) are read beside them, and
// each is deleted by the driver that holds it.
func TestChunkedStorageIsUnchanged(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "chunked-records")
	owner := tu.NewCR(tu.EchoGVK, ns, "big", map[string]any{"message": "one"})
	if err := c.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	owner.SetGroupVersionKind(tu.EchoGVK)
	plain, err := storage.StorageDriver(nil)(ctx, owner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	chunked, err := storage.StorageDriver(map[schema.GroupVersionKind]bool{tu.EchoGVK: true})(ctx, owner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	old := storedRelease(t, "big", 1, release.StatusSuperseded, false)
	if err := plain.Create("sh.helm.release.v1.big.v1", old); err != nil {
		t.Fatal(err)
	}
	rel := storedRelease(t, "big", 2, release.StatusDeployed, false)
	b := make([]byte, 1200<<10)
	rand.New(rand.NewSource(2)).Read(b)
	rel.Manifest = base64.StdEncoding.EncodeToString(b)
	if err := chunked.Create("sh.helm.release.v1.big.v2", rel); err != nil {
		t.Fatal(err)
	}

	sc := secretsClient(t, ns)
	index := getSecret(t, sc, "sh.helm.release.v1.big.v2")
	if index.Type != hopstorage.SecretTypeChunkedIndex || index.Labels["owner"] != "helm-app-operator" {
		t.Errorf("the chunked revision's Secret: type %s, labels %v", index.Type, index.Labels)
	}
	if refs := index.OwnerReferences; len(refs) != 1 || refs[0].UID != owner.GetUID() {
		t.Errorf("the index Secret's owner references: %v", refs)
	}
	hop := hopstorage.NewChunkedSecrets(sc, "helm-app-operator", hopstorage.ChunkedSecretsConfig{ChunkSize: (1024 - 8) * 1024})
	got, err := hop.Get("sh.helm.release.v1.big.v2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest != rel.Manifest || got.Version != 2 || got.Info.Status != release.StatusDeployed || got.Config["message"] != rel.Config["message"] {
		t.Errorf("helm-operator-plugins' driver reads another release back: version %d, %s", got.Version, got.Info.Status)
	}
	if h := getSecret(t, sc, "sh.helm.release.v1.big.v1"); h.Type != "helm.sh/release.v1" {
		t.Errorf("the plain revision's type %s", h.Type)
	}
	rels, err := chunked.Query(map[string]string{"name": "big", "owner": "helm"})
	if err != nil {
		t.Fatal(err)
	}
	versions := []int{}
	for _, r := range rels {
		versions = append(versions, r.Version)
	}
	slices.Sort(versions)
	if !slices.Equal(versions, []int{1, 2}) {
		t.Errorf("the chunked kind's history: revisions %v, want 1 (Helm's format) and 2 (chunked)", versions)
	}
	for _, key := range []string{"sh.helm.release.v1.big.v1", "sh.helm.release.v1.big.v2"} {
		if _, err := chunked.Delete(key); err != nil {
			t.Errorf("Delete %s: %v", key, err)
		}
	}
	list, err := sc.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d Secrets left after deleting both revisions", len(list.Items))
	}
}

// The driver answers a Query it listed before from that list and its own
// writes since, as the API server returned them: no request, and the same
// releases and labels a real list returns (Helm's driver, asked
// afterwards), by the history's labels and by a status selector too. A
// record someone else created meanwhile is not seen until a write of the
// driver fails on it; after a failed write every Query lists again.
func TestSecretsDriverAnswersTheReadBackFromItsWrites(t *testing.T) {
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "read-back")
	var mu sync.Mutex
	lists := 0
	counted := tu.RecordRequests(cfg, func(r tu.Request) {
		if r.Method == "GET" && strings.HasSuffix(r.Path, "/secrets") {
			mu.Lock()
			lists++
			mu.Unlock()
		}
	})
	cs, err := kubernetes.NewForConfig(counted)
	if err != nil {
		t.Fatal(err)
	}
	ours := storage.NewHelmSecrets(cs.CoreV1().Secrets(ns), nil)
	helm := driver.NewSecrets(secretsClient(t, ns))
	listed := func() int { mu.Lock(); defer mu.Unlock(); return lists }
	history := map[string]string{"name": "web", "owner": "helm"}
	deployed := map[string]string{"name": "web", "owner": "helm", "status": "deployed"}
	for _, q := range []map[string]string{history, deployed} {
		if _, err := ours.Query(q); err != driver.ErrReleaseNotFound {
			t.Fatalf("first Query: %v", err)
		}
	}
	if n := listed(); n != 2 {
		t.Fatalf("%d lists for the first two Queries, want 2", n)
	}
	write := func(f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	key := func(v int) string { return fmt.Sprintf("sh.helm.release.v1.web.v%d", v) }
	r1 := storedRelease(t, "web", 1, release.StatusPendingInstall, false)
	write(func() error { return ours.Create(key(1), r1) })
	r1.Info.Status = release.StatusDeployed
	write(func() error { return ours.Update(key(1), r1) })
	r2 := storedRelease(t, "web", 2, release.StatusPendingUpgrade, false)
	write(func() error { return ours.Create(key(2), r2) })
	r1.Info.Status = release.StatusSuperseded
	write(func() error { return ours.Update(key(1), r1) })
	r2.Info.Status = release.StatusDeployed
	write(func() error { return ours.Update(key(2), r2) })
	r3 := storedRelease(t, "web", 3, release.StatusFailed, false)
	write(func() error { return ours.Create(key(3), r3) })
	if _, err := ours.Delete(key(1)); err != nil {
		t.Fatal(err)
	}

	same := func(what string, q map[string]string, want int) {
		t.Helper()
		got, err := ours.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		real, err := helm.Query(q)
		if err != nil {
			t.Fatalf("%s: Helm's: %v", what, err)
		}
		if len(got) != want || !slices.Equal(releasesJSON(t, got), releasesJSON(t, real)) {
			t.Errorf("%s: %d releases, Helm's list %d, or they differ:\n%v\n%v", what, len(got), len(real), releasesJSON(t, got), releasesJSON(t, real))
		}
	}
	before := listed()
	same("history after the writes", history, 2)
	same("deployed after the writes", deployed, 1)
	if n := listed() - before; n != 0 {
		t.Errorf("%d lists for the read-back, want 0", n)
	}

	// Someone else (the helm CLI) stores revision 4 meanwhile: unseen, until
	// the driver's own create of revision 4 is refused.
	write(func() error { return helm.Create(key(4), storedRelease(t, "web", 4, release.StatusDeployed, false)) })
	if got, _ := ours.Query(history); len(got) != 2 {
		t.Fatalf("history before the refused create: %d releases, want the 2 known", len(got))
	}
	if err := ours.Create(key(4), storedRelease(t, "web", 4, release.StatusPendingUpgrade, false)); err != driver.ErrReleaseExists {
		t.Fatalf("create over the other's revision 4: %v, want ErrReleaseExists", err)
	}
	before = listed()
	same("history after the refused create", history, 3)
	if n := listed() - before; n != 1 {
		t.Errorf("%d lists for the history after a failed write, want 1", n)
	}
}
