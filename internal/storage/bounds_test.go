package storage_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/helmapp/helm-app-operator/internal/storage"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// gzipped is the gzip of a release's JSON padded with pad bytes of
// whitespace.
func gzipped(t *testing.T, name string, version, pad int) []byte {
	t.Helper()
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	fmt.Fprintf(w, `{"name":%q,"version":%d,"info":{"status":"deployed"}`, name, version)
	spaces := bytes.Repeat([]byte{' '}, 1<<20)
	for left := pad; left > 0; left -= len(spaces) {
		_, _ = w.Write(spaces[:min(left, len(spaces))])
	}
	_, _ = w.Write([]byte("}"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// A chunked index that lists more chunks than a revision of
// storage.MaxRecordSize takes is refused before any of them is read:
// reported (storage.InvalidRecordError, naming the index Secret) by a read of
// its release, skipped by the namespace's list; other releases read on.
func TestChunkedIndexListingTooManyChunks(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "many-chunks")
	var chunkGets atomic.Int32
	counted := tu.RecordRequests(cfg, func(r tu.Request) {
		if r.Method == "GET" && strings.Contains(r.Path, "/secrets/sh.helm.release.v1.web.v2-") {
			chunkGets.Add(1)
		}
	})
	cs, err := kubernetes.NewForConfig(counted)
	if err != nil {
		t.Fatal(err)
	}
	sc := cs.CoreV1().Secrets(ns)
	d := storage.NewChunkedSecrets(sc, testChunkSize)
	if err := d.Create("sh.helm.release.v1.other.v1", bigRelease(t, "other", 1, release.StatusDeployed, 1)); err != nil {
		t.Fatal(err)
	}

	most := storage.MaxChunks(testChunkSize)
	names := make([]string, most) // with the index's own, one too many
	for i := range names {
		names[i] = fmt.Sprintf("sh.helm.release.v1.web.v2-%d", i)
	}
	extra, _ := json.Marshal(names)
	key := "sh.helm.release.v1.web.v2"
	if _, err := sc.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"owner": storage.ChunkedOwner, "type": "index",
			"name": "web", "status": "deployed", "version": "2", "key": key}},
		Type: "operatorframework.io/index.v1",
		Data: map[string][]byte{"chunk": gzipped(t, "web", 2, 0), "extraChunks": extra},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := fmt.Sprintf("release record Secret %s/%s lists %d chunks, over the %d a revision of 16 MiB takes; it is not read: delete or repair it",
		ns, key, most+1, most)
	_, err = d.Get(key)
	var inv *storage.InvalidRecordError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), want) {
		t.Errorf("Get: %v\nwant an InvalidRecordError: %s", err, want)
	}
	if _, err := d.Query(map[string]string{"name": "web", "owner": "helm"}); !errors.As(err, &inv) {
		t.Errorf("Query of the release: %v, want the InvalidRecordError", err)
	}
	if rels, err := d.Query(map[string]string{"name": "other", "owner": "helm"}); err != nil || len(rels) != 1 {
		t.Errorf("Query of another release: %d releases, %v", len(rels), err)
	}
	if rels, err := d.List(func(*release.Release) bool { return true }); err != nil || len(rels) != 1 {
		t.Errorf("List of the namespace: %d releases, %v; want the other release's", len(rels), err)
	}
	if n := chunkGets.Load(); n != 0 {
		t.Errorf("%d chunks of the index were read", n)
	}
}

// A Helm record past the bound is reported by the reads of its release
// (Get, Query by its name), naming it, and skipped by the namespace's
// list and by a query of no one release; the release beside it reads on.
func TestSecretsDriverReportsARecordPastTheBound(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "record-bomb")
	sc := secretsClient(t, ns)
	d := storage.NewHelmSecrets(sc, nil)
	if err := d.Create("sh.helm.release.v1.other.v1", storedRelease(t, "other", 1, release.StatusDeployed, false)); err != nil {
		t.Fatal(err)
	}
	key := "sh.helm.release.v1.web.v2"
	if _, err := sc.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"owner": "helm",
			"name": "web", "status": "deployed", "version": "2"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(gzipped(t, "web", 2, 64<<20)))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "release record Secret " + ns + "/" + key + " decodes past 16 MiB; it is not read: delete or repair it"
	var inv *storage.InvalidRecordError
	if _, err := d.Get(key); !errors.As(err, &inv) || !strings.Contains(err.Error(), want) {
		t.Errorf("Get: %v\nwant: %s", err, want)
	}
	if _, err := d.Query(map[string]string{"name": "web", "owner": "helm"}); !errors.As(err, &inv) {
		t.Errorf("Query of the release: %v, want the InvalidRecordError", err)
	}
	if rels, err := d.Query(map[string]string{"owner": "helm", "status": "deployed"}); err != nil || len(rels) != 1 || rels[0].Name != "other" {
		t.Errorf("Query of the namespace's deployed records: %d releases, %v; want the other release's", len(rels), err)
	}
	if rels, err := d.List(func(*release.Release) bool { return true }); err != nil || len(rels) != 1 {
		t.Errorf("List: %d releases, %v; want the other release's", len(rels), err)
	}
	if _, err := d.Query(map[string]string{"name": "other", "owner": "helm"}); err != nil {
		t.Errorf("Query of another release: %v", err)
	}
	if _, err := d.Get("sh.helm.release.v1.none.v1"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Get of no record: %v", err)
	}
}
