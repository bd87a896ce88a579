package operator_test

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
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/helmapp/helm-app-operator/internal/operator"
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
	ours := operator.NewHelmSecrets(oursSC, func() time.Time { return pinned })

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
			helm, ours := driver.Driver(driver.NewSecrets(sc)), operator.NewHelmSecrets(sc, nil)
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
	err := operator.NewHelmSecrets(sc, nil).Create("sh.helm.release.v1.huge.v1", rel)
	if err == nil || !strings.Contains(err.Error(), "over the 1048576 bytes a Secret holds") {
		t.Fatalf("Create of a 1.2 MB record: %v, want the too-large error", err)
	}
	size, _ := operator.EncodedSize(rel)
	if !strings.Contains(err.Error(), strconv.Itoa(size)) {
		t.Errorf("error %q does not name the encoded size %d", err, size)
	}
	if _, err := sc.Get(context.Background(), "sh.helm.release.v1.huge.v1", metav1.GetOptions{}); err == nil {
		t.Errorf("the too-large record was written")
	}
}
