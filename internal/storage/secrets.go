package storage

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kblabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// helmSecrets is a release storage driver that stores each revision in one
// Secret exactly as Helm v3's Secrets driver (helm.sh/helm/v3
// pkg/storage/driver, v3.22) does, and reads what that driver wrote:
//
//   - the Secret is named by the storage key (sh.helm.release.v1.<name>.v<revision>),
//     of type helm.sh/release.v1, with one data key, release: the base64 of
//     the gzip (best compression, empty header) of the release's JSON;
//   - its labels are the release's own labels, then createdAt (on Create)
//     or modifiedAt (on Update) as Unix seconds, then the release's labels
//     again, then name, owner=helm, status and version — in Helm's order, so
//     that a release read by Query (whose labels include createdAt) keeps it
//     through an Update, as with Helm;
//   - Get returns the release with the system labels filtered out, List and
//     Query with every label, as Helm's driver does; records that do not
//     decode are skipped by List and Query.
//
// What it does differently: it answers a Query again from what it knows
// (see known), the gzip writer and reader and the buffers are
// pooled (Helm allocates a new compressor, about 1 MiB of state, for every
// record it writes); a revision too large for its Secret
// (TooLargeError) is refused before the request, measured on the
// encoding that would be sent; and a record that does not decode is an
// error of Get, where Helm's driver panics. The tests in
// secrets_test.go compare both drivers' Secrets byte for byte.
type helmSecrets struct {
	impl corev1client.SecretInterface
	// now is the clock of the createdAt and modifiedAt labels.
	now func() time.Time
	// log, at V(1), names the records List and Query skip as undecodable
	// (Helm's driver logs them at debug level with their data; this names
	// them only).
	log logr.Logger

	mu sync.Mutex
	// known holds, by label selector, the Secrets a Query listed, with
	// every write this driver made since applied to them as the API server
	// answered it (the created or updated Secret, resourceVersion and all;
	// a deleted one gone). A Query by the same labels is answered from it:
	// the read-back of Helm's storage after an action is then no request.
	//
	// The driver lives for one action configuration (one reconcile), so
	// what it knows is what the reconcile's own list found plus what the
	// reconcile wrote. A write that fails, for any reason (a failed write
	// may have landed; a create refused as existing means someone else
	// wrote), forgets everything and answers no more Query from memory.
	// What it cannot see is a record someone else wrote meanwhile: that
	// write's watch event is not this process' own (release.Writes), so it
	// reconciles the resource again, and the next configuration lists.
	known map[string]map[string]*corev1.Secret
	// gen counts writes begun and ended, so that a list that overlapped a
	// write is not kept; broken is set by a write that failed.
	gen    uint64
	broken bool
}

var _ driver.Driver = (*helmSecrets)(nil)

// newHelmSecrets is the driver over the Secrets client impl.
func newHelmSecrets(impl corev1client.SecretInterface) *helmSecrets {
	return &helmSecrets{impl: impl, now: time.Now, log: logr.Discard(), known: map[string]map[string]*corev1.Secret{}}
}

// Name is Helm's Secrets driver's name: Helm's actions tell drivers apart
// by it.
func (d *helmSecrets) Name() string { return driver.SecretsDriverName }

func (d *helmSecrets) Get(key string) (*helmrelease.Release, error) {
	obj, err := d.impl.Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, driver.ErrReleaseNotFound
		}
		return nil, fmt.Errorf("get: failed to get %q: %w", key, err)
	}
	r, err := DecodeSecret(obj)
	if errorsAsInvalid(err) {
		return nil, err // it names the record
	}
	if err != nil {
		return nil, fmt.Errorf("get: failed to decode data %q: %w", key, err)
	}
	return r, nil
}

func (d *helmSecrets) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	sel := kblabels.Set{"owner": "helm"}.AsSelector()
	list, err := d.impl.List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list: failed to list: %w", err)
	}
	var out []*helmrelease.Release
	for i := range list.Items {
		r, err := decodeRelease(list.Items[i].Data["release"])
		if err != nil {
			// Past a bound too: this list is the namespace's, and the
			// record is its release's to report (Query).
			d.log.V(1).Info("skipping an undecodable release record", "record", list.Items[i].Name, "error", err.Error())
			continue
		}
		r.Labels = list.Items[i].Labels
		if filter(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (d *helmSecrets) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	set := kblabels.Set{}
	for k, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			return nil, fmt.Errorf("invalid label value: %q: %s", v, joinErrs(errs))
		}
		set[k] = v
	}
	sel := set.AsSelector().String()
	items, ok, gen := d.knownList(sel)
	if !ok {
		list, err := d.impl.List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("query: failed to query with labels: %w", err)
		}
		items = make([]*corev1.Secret, 0, len(list.Items))
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
		d.keep(sel, items, gen)
	}
	if len(items) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	var out []*helmrelease.Release
	for _, item := range items {
		r, err := decodeRelease(item.Data["release"])
		if err != nil {
			if err = invalid(item, err); errorsAsInvalid(err) && labels["name"] != "" {
				// A record of the release queried, which Helm would act
				// without: the release is not acted on (see
				// InvalidRecordError). A query of no one release skips it.
				return nil, err
			}
			d.log.V(1).Info("skipping an undecodable release record", "record", item.Name, "error", err.Error())
			continue
		}
		r.Labels = maps.Clone(item.Labels)
		out = append(out, r)
	}
	return out, nil
}

// AssumeNoHistory takes release name to have no record, as the metadata
// cache of release records showed (release.NoHistoryAssumer): Helm's history
// query of name is answered empty until a write fails. A create of the
// release's first record that someone else made meanwhile fails as existing
// (driver.ErrReleaseExists), which forgets it.
func (d *helmSecrets) AssumeNoHistory(name string) bool {
	if errs := validation.IsValidLabelValue(name); len(errs) != 0 {
		return false
	}
	sel := kblabels.Set{"name": name, "owner": "helm"}.AsSelector().String()
	d.mu.Lock()
	defer d.mu.Unlock()
	if known, ok := d.known[sel]; d.broken || (ok && len(known) > 0) {
		return false
	}
	d.known[sel] = map[string]*corev1.Secret{}
	return true
}

// knownList is what the driver knows of the Secrets selected by sel, in
// name order, if it knows; gen is the write count to keep a list under.
func (d *helmSecrets) knownList(sel string) ([]*corev1.Secret, bool, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	byName, ok := d.known[sel]
	if !ok || d.broken {
		return nil, false, d.gen
	}
	names := slices.Sorted(maps.Keys(byName))
	out := make([]*corev1.Secret, 0, len(names))
	for _, n := range names {
		out = append(out, byName[n])
	}
	return out, true, d.gen
}

// keep keeps a list of sel made while the write count was gen, unless a
// write began or ended since.
func (d *helmSecrets) keep(sel string, items []*corev1.Secret, gen uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen != gen || d.broken {
		return
	}
	byName := make(map[string]*corev1.Secret, len(items))
	for _, s := range items {
		byName[s.Name] = s
	}
	d.known[sel] = byName
}

// writing counts a write begun.
func (d *helmSecrets) writing() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
}

// wrote applies the end of a write of the Secret name to what the driver
// knows: s is the Secret as the server returned it (nil: deleted), err the
// write's error (which forgets everything).
func (d *helmSecrets) wrote(name string, s *corev1.Secret, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if err != nil || (s != nil && s.ResourceVersion == "") {
		d.broken = true
		clear(d.known)
		return
	}
	for sel, byName := range d.known {
		delete(byName, name)
		if s == nil {
			continue
		}
		if parsed, perr := kblabels.Parse(sel); perr == nil && parsed.Matches(kblabels.Set(s.Labels)) {
			byName[name] = s
		}
	}
}

func (d *helmSecrets) Create(key string, rls *helmrelease.Release) error {
	obj, err := d.secret(key, rls, "createdAt")
	if err != nil {
		return err
	}
	d.writing()
	got, err := d.impl.Create(context.Background(), obj, metav1.CreateOptions{})
	d.wrote(key, got, err)
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists
		}
		return fmt.Errorf("create: failed to create: %w", err)
	}
	return nil
}

func (d *helmSecrets) Update(key string, rls *helmrelease.Release) error {
	obj, err := d.secret(key, rls, "modifiedAt")
	if err != nil {
		return err
	}
	d.writing()
	got, err := d.impl.Update(context.Background(), obj, metav1.UpdateOptions{})
	d.wrote(key, got, err)
	if err != nil {
		return fmt.Errorf("update: failed to update: %w", err)
	}
	return nil
}

func (d *helmSecrets) Delete(key string) (*helmrelease.Release, error) {
	rls, err := d.Get(key)
	if err != nil {
		return nil, err
	}
	d.writing()
	err = d.impl.Delete(context.Background(), key, metav1.DeleteOptions{})
	d.wrote(key, nil, err)
	return rls, err
}

// secret is the Secret that stores rls under key, its time label stamp
// (createdAt or modifiedAt) set to now; a revision whose encoding is over
// SecretDataLimit, or whose JSON is past a bound of the reads
// (jsonWithinBounds), is a *TooLargeError.
func (d *helmSecrets) secret(key string, rls *helmrelease.Release, stamp string) (*corev1.Secret, error) {
	data, err := encodeRelease(key, rls)
	var tl *TooLargeError
	if errors.As(err, &tl) {
		return nil, err
	}
	if err != nil {
		op := "create"
		if stamp == "modifiedAt" {
			op = "update"
		}
		return nil, fmt.Errorf("%s: failed to encode release %q: %w", op, rls.Name, err)
	}
	if len(data) > SecretDataLimit {
		return nil, &TooLargeError{Key: key, Size: len(data), Limit: SecretDataLimit}
	}
	// Helm's order: the release's labels, the stamp, the release's labels
	// again (a stamp among them wins), then the system labels.
	lbs := make(map[string]string, len(rls.Labels)+5)
	maps.Copy(lbs, rls.Labels)
	lbs[stamp] = strconv.FormatInt(d.now().Unix(), 10)
	maps.Copy(lbs, rls.Labels)
	lbs["name"] = rls.Name
	lbs["owner"] = "helm"
	lbs["status"] = rls.Info.Status.String()
	lbs["version"] = strconv.Itoa(rls.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs},
		Type:       helmSecretType,
		Data:       map[string][]byte{"release": data},
	}, nil
}

// systemLabels are the labels Helm's driver sets itself, which its Get
// filters out of a release's labels.
var systemLabels = driver.GetSystemLabels()

func withoutSystemLabels(lbs map[string]string) map[string]string {
	out := make(map[string]string, len(lbs))
	for k, v := range lbs {
		system := false
		for _, s := range systemLabels {
			if k == s {
				system = true
				break
			}
		}
		if !system {
			out[k] = v
		}
	}
	return out
}

func joinErrs(errs []string) string {
	var b bytes.Buffer
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e)
	}
	return b.String()
}

// gzipWriters keeps gzip writers at Helm's level, each reset before use: a
// new one allocates about 0.8 MB of compressor state. Not a sync.Pool: the
// garbage collector empties those, and under a burst of installs (a
// collection every few megabytes) that rebuilt a writer for every seven
// installs or so, ~0.1 MB of allocation per install (docs/performance.md).
// The list keeps gzipWritersKept, about 3 MB resident once a burst has used
// them; a writer more, taken while all are in use, is dropped after use.
var gzipWriters = make(writerFreeList, gzipWritersKept)

// gzipWritersKept bounds gzipWriters: compressing is CPU-bound and short, so
// a few more writers than cores are in use at once.
const gzipWritersKept = 4

type writerFreeList chan *gzip.Writer

func (l writerFreeList) get() *gzip.Writer {
	select {
	case w := <-l:
		return w
	default:
	}
	w, err := gzip.NewWriterLevel(io.Discard, gzip.BestCompression)
	if err != nil {
		panic(err) // a constant, valid level
	}
	return w
}

func (l writerFreeList) put(w *gzip.Writer) {
	select {
	case l <- w:
	default:
	}
}

// buffers holds the buffers the JSON is compressed into, and decompressed
// into (record.go).
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodeRelease is Helm's encoding of rls, stored under key: the base64 of
// the gzip, at best compression with an empty header, of its JSON. A
// revision whose JSON the drivers would not read back (jsonWithinBounds)
// is a *TooLargeError.
func encodeRelease(key string, rls *helmrelease.Release) ([]byte, error) {
	b, err := json.Marshal(rls)
	if err != nil {
		return nil, err
	}
	if err := jsonWithinBounds(key, b); err != nil {
		return nil, err
	}
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	w := gzipWriters.get()
	defer gzipWriters.put(w)
	w.Reset(buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}
