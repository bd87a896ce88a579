//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The status recorder checks a status when its watch delivers it, against
// Helm's records as they are then. A record deleted in between (`helm
// uninstall` by hand right after the operator wrote a status naming it)
// would make a true status look like a lie. So the recorder also watches
// the release's record Secrets and keeps, for each deleted record, the
// resourceVersion of its deletion and its values' page.title.
//
// A status is what one reconcile read, and a reconcile reads Helm's records
// before it writes: a `helm uninstall` by hand may land between the read
// and the write (the flake of TestViewLaggingHelmStorage in CI, stops 45
// and 46: the operator read revision 2 deployed — Helm's rollback by hand
// not finished — judged readiness, and wrote; the uninstall by hand had
// deleted the records in between). Reconciles of one resource run one at a
// time, so that read came after the status written before this one. A
// status whose revision Helm no longer has was therefore true when read if
// that revision's record was deleted after the previous status's
// resourceVersion; one naming a revision deleted before the previous status
// was written is a lie. Both resourceVersions come from the suite's one
// etcd, whose revision counter orders every write, so they compare as
// numbers (Kubernetes calls them opaque; here they are etcd revisions of the
// same store).

// deletedRecord is a release record the recorder saw deleted.
type deletedRecord struct {
	version int
	rv      int64 // the resourceVersion of the deletion
	title   any   // the record's values' page.title
}

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// watchRecordDeletions records every deletion of release name's plain
// Helm records (Secrets labelled owner=helm, name=<release>) until ctx ends.
// listed is closed once the records that exist were listed (the watch
// began), or at once when there are none.
func (r *statusRecorder) watchRecordDeletions(ctx context.Context, listed chan struct{}) {
	var once sync.Once
	opts := metav1.ListOptions{LabelSelector: "owner=helm,name=" + r.name}
	// The first callback is a listed record; with none, a list tells.
	go func() {
		list, err := suite.dyn.Resource(secretsGVR).Namespace(r.e.ns).List(ctx, opts)
		if err == nil && len(list.Items) == 0 {
			once.Do(func() { close(listed) })
		}
	}()
	r.e.watchObjects(ctx, secretsGVR, opts,
		func(u *unstructured.Unstructured, deleted bool, _ time.Time) bool {
			once.Do(func() { close(listed) })
			if !deleted {
				return false
			}
			d := deletedRecord{}
			d.rv, _ = strconv.ParseInt(u.GetResourceVersion(), 10, 64)
			d.version, _ = strconv.Atoi(u.GetLabels()["version"])
			if rel, err := decodeRecordSecret(u); err == nil {
				page, _ := rel.Config["page"].(map[string]any)
				d.title = page["title"]
			}
			r.mu.Lock()
			r.deleted = append(r.deleted, d)
			r.mu.Unlock()
			return false
		})
}

// trueWhenWritten says whether status s, which names a revision Helm does
// not have now (or has with other values), was true when the reconcile
// that wrote it read Helm: that revision's record, with the values s claims
// when s says Ready, was deleted after the status written before s. The
// deletion may reach the recorder after the status (two watches): it waits
// a few seconds for it.
func (r *statusRecorder) trueWhenWritten(s seenStatus) bool {
	since, err := strconv.ParseInt(s.since, 10, 64)
	if err != nil {
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		for _, d := range r.deleted {
			if int64(d.version) == s.revision && d.rv > since && (!s.ready || s.obs != s.gen || d.title == s.title) {
				r.mu.Unlock()
				return true
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// decodeRecordSecret reads the release out of a Helm record Secret (its
// data.release: base64 of a gzipped JSON release, under the Secret's own
// base64).
func decodeRecordSecret(u *unstructured.Unstructured) (*helmrelease.Release, error) {
	data, _, _ := unstructured.NestedString(u.Object, "data", "release")
	outer, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, err
	}
	inner, err := base64.StdEncoding.DecodeString(string(outer))
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(inner, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(inner))
		if err != nil {
			return nil, err
		}
		if inner, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	rel := &helmrelease.Release{}
	return rel, json.Unmarshal(inner, rel)
}

// newStatusRecorder is a recorder of nginx/name's statuses whose watch of
// the release's record deletions runs until ctx ends (records is closed
// then) and has listed the records when it returns; the caller starts the
// watch of the resource (recordStatuses) or calls observe itself.
func (e *env) newStatusRecorder(ctx context.Context, cancel context.CancelFunc, name string) (r *statusRecorder, records chan struct{}) {
	r = &statusRecorder{e: e, name: name, last: map[string]string{}, lastRV: map[string]string{}, stop: cancel, done: make(chan struct{})}
	records = make(chan struct{})
	listed := make(chan struct{})
	go func() {
		defer close(records)
		r.watchRecordDeletions(ctx, listed)
	}()
	select {
	case <-listed:
	case <-time.After(deadline):
		e.fatalf("the release's records were not listed in %s", deadline)
	}
	return r, records
}

// The recorder judges a status by Helm's records as the reconcile that
// wrote it read them, not when its watch delivered it: a status naming
// revision 1, written before `helm uninstall` by hand but seen after it,
// told the truth; so did the next one, written after the uninstall by a
// reconcile that may have read before it (the flake of
// TestViewLaggingHelmStorage in CI, stops 45 and 46: "deployedRelease names
// revision 2; Helm has []"); a status written after that one still naming
// revision 1 lies, and the recorder says so.
func TestStatusRecorderJudgesAStatusAsOfItsWrite(t *testing.T) {
	e := newEnv(t, "e2e-recorder", watchOptions{})
	e.applyNginx("web", nginxPage("one"))
	rev := e.waitServing("web", "", "one")
	e.kill() // nothing but the test writes the status now
	defer e.restart()

	ctx, cancel := context.WithCancel(context.Background())
	r, records := e.newStatusRecorder(ctx, cancel, "web")
	defer func() { cancel(); <-records }()

	res := suite.dyn.Resource(nginxGVR).Namespace(e.ns)
	u, err := res.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.observe(u) // the status before: not checked, remembered
	write := func(message string) *unstructured.Unstructured {
		t.Helper()
		cur, err := res.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(cur.Object, message, "status", "deployedRelease", "appVersion"); err != nil {
			t.Fatal(err)
		}
		out, err := res.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := write("written before the uninstall")
	e.helmByHand(false, "uninstall", "web")
	r.observe(before) // delivered late
	read := write("written after the uninstall, read before it")
	r.observe(read)
	after := write("written after the uninstall, read after it")
	r.observe(after)

	r.mu.Lock()
	defer r.mu.Unlock()
	byRV := map[string]string{}
	for _, s := range r.seen {
		byRV[s.rv] = s.violation
	}
	t.Logf("revision %d; before the uninstall (rv %s): %q; read before it (rv %s): %q; after it (rv %s): %q",
		rev, before.GetResourceVersion(), byRV[before.GetResourceVersion()], read.GetResourceVersion(), byRV[read.GetResourceVersion()],
		after.GetResourceVersion(), byRV[after.GetResourceVersion()])
	if v := byRV[before.GetResourceVersion()]; v != "" {
		t.Errorf("a status written before the uninstall and seen after it was taken for a lie: %s", v)
	}
	if v := byRV[read.GetResourceVersion()]; v != "" {
		t.Errorf("a status written after the uninstall by a reconcile that may have read before it was taken for a lie: %s", v)
	}
	if v := byRV[after.GetResourceVersion()]; !strings.Contains(v, fmt.Sprintf("deployedRelease names revision %d; Helm has []", rev)) {
		t.Errorf("a status written after the uninstall naming revision %d was not caught: %q", rev, v)
	}
}
