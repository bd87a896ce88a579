package storage

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
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
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// chunkedSecrets is a release storage driver that stores each revision in
// an index Secret and chunk Secrets, in helm-operator-plugins' chunked
// format (pkg/storage, v0.9.1), so that either driver reads what the other
// wrote:
//
//   - the revision is the gzip (best compression) of the JSON of the
//     release with its labels (a "labels" field beside the release's own),
//     cut into pieces of chunkSize bytes;
//   - the index Secret is named by the storage key, of type
//     operatorframework.io/index.v1, labels name, owner, status, version,
//     key, type=index and createdAt (modifiedAt after an update), data
//     chunk (the first piece) and extraChunks (the JSON list of the other
//     pieces' Secrets' names);
//   - each other piece is a chunk Secret <key>-<hash> (hash: FNV-1a 64 of
//     the piece, base32 in the alphabet a–z1–6 without padding), of type
//     operatorframework.io/chunk.v1, immutable, labels owner, key,
//     type=chunk, owned (controller) by the index Secret.
//
// What it does differently is the order of its writes, so that a process
// killed between any two of them leaves a record that reads as the old
// revision or the new one, never an error (issue 28, docs/recovery.md
// "Crash at every write"; helm-operator-plugins' Update deletes the old
// chunks before it writes the new ones, and its reads fail on a missing
// chunk forever):
//
//   - Update creates the new chunks first (owned by the existing index),
//     then updates the index (the one switch from old to new), then deletes
//     the chunks the new index does not list. A crash leaves at worst
//     chunks no index lists, which are harmless: the next update of the
//     record deletes them, and the garbage collector does with their index.
//   - Create must create the index before its chunks (they are owned by
//     it). An index some of whose chunks do not exist is a torn create: it
//     reads as no record (Get: not found; List and Query skip it), and
//     Create, finding it in the way, deletes it and creates the record
//     again. That is safe: Helm creates a revision's record before it
//     applies anything of that revision, so a revision whose record was
//     never completed has changed nothing in the cluster; and the operator
//     runs one action per release at a time (one reconcile per resource,
//     one leader), so a torn index is never another writer's create in
//     progress. (A record helm-operator-plugins' driver tore in an update
//     reads the same way: as absent.)
//   - Query (Helm's history read, which every reconcile makes) deletes the
//     chunks no index lists, once per index version per process
//     (sweepLeftovers), so that those an update killed before its last
//     writes left do not outlive the restart. A chunk is deleted only while
//     no update of its record runs in this process (recordLocks); the
//     operator is the only writer of its records (one leader).
//   - Delete deletes the index and its chunks in one request by label, as
//     helm-operator-plugins' does; stopped partway it leaves chunks whose
//     owner is gone (collected) or an index without chunks (torn: absent).
type chunkedSecrets struct {
	impl      corev1client.SecretInterface
	owner     string
	chunkSize int
	now       func() time.Time
	log       logr.Logger
}

var _ driver.Driver = (*chunkedSecrets)(nil)

const (
	chunkedIndexType corev1.SecretType = "operatorframework.io/index.v1"
	chunkedChunkType corev1.SecretType = "operatorframework.io/chunk.v1"
)

// chunkHashEncoding is the encoding of a chunk's hash in its name.
var chunkHashEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz123456").WithPadding(base32.NoPadding)

// chunkedSystemLabels are the labels the format sets itself, filtered out
// of a release's labels by Get and Query.
var chunkedSystemLabels = []string{"name", "owner", "status", "version", "key", "type", "createdAt", "modifiedAt"}

// errTornRecord is a record some of whose chunks do not exist.
var errTornRecord = errors.New("torn record: a chunk it lists does not exist")

// newChunkedSecrets is the driver over the Secrets client impl, its
// Secrets labelled owner=owner, in chunks of chunkSize bytes.
func newChunkedSecrets(impl corev1client.SecretInterface, owner string, chunkSize int) *chunkedSecrets {
	return &chunkedSecrets{impl: impl, owner: owner, chunkSize: chunkSize, now: time.Now, log: logr.Discard()}
}

// Name is helm-operator-plugins' driver's name for the same owner.
func (d *chunkedSecrets) Name() string { return d.owner + "/chunkedSecrets" }

type chunkPiece struct {
	name string
	data []byte
}

// chunkedRecord is the JSON of a revision: the release, and its labels
// (which the release's JSON omits).
type chunkedRecord struct {
	helmrelease.Release
	Labels map[string]string `json:"labels"`
}

// pieces encodes rls as the record under key: its pieces, the first kept
// in the index. A revision whose JSON the drivers would not read back
// (jsonWithinBounds) is a *TooLargeError.
func (d *chunkedSecrets) pieces(key string, rls *helmrelease.Release) ([]chunkPiece, error) {
	// The JSON is helm-operator-plugins' (an encoder's: a newline ends it).
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(chunkedRecord{Release: *rls, Labels: rls.Labels}); err != nil {
		return nil, err
	}
	if err := jsonWithinBounds(key, js.Bytes()); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(js.Bytes()); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	var out []chunkPiece
	for len(data) > 0 {
		n := min(d.chunkSize, len(data))
		h := fnv.New64a()
		_, _ = h.Write(data[:n])
		out = append(out, chunkPiece{name: key + "-" + chunkHashEncoding.EncodeToString(h.Sum(nil)), data: data[:n]})
		data = data[n:]
	}
	return out, nil
}

// index is the index Secret of the record under key made of pieces.
func (d *chunkedSecrets) index(key string, rls *helmrelease.Release, pieces []chunkPiece) *corev1.Secret {
	names := make([]string, 0, len(pieces)-1)
	for _, p := range pieces[1:] {
		names = append(names, p.name)
	}
	extra, _ := json.Marshal(names) // a list of strings
	mutable := false
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{
			"name":    rls.Name,
			"owner":   d.owner,
			"status":  rls.Info.Status.String(),
			"version": strconv.Itoa(rls.Version),
			"key":     key,
			"type":    "index",
		}},
		Type:      chunkedIndexType,
		Immutable: &mutable,
		Data:      map[string][]byte{"chunk": pieces[0].data, "extraChunks": extra},
	}
}

// chunk is the chunk Secret of p, owned by index.
func (d *chunkedSecrets) chunk(index *corev1.Secret, p chunkPiece) *corev1.Secret {
	yes, no := true, false
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:   p.name,
			Labels: map[string]string{"owner": d.owner, "key": index.Name, "type": "chunk"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Secret", Name: index.Name, UID: index.UID,
				Controller: &yes, BlockOwnerDeletion: &no,
			}},
		},
		Type:      chunkedChunkType,
		Immutable: &yes,
		Data:      map[string][]byte{"chunk": p.data},
	}
}

// createChunks creates the chunk Secrets of pieces (but the first) owned
// by index. A chunk that exists owned by index has the same content (its
// name is its hash); one owned by another (a deleted index of the same
// name) is replaced, or the garbage collector would take it.
func (d *chunkedSecrets) createChunks(ctx context.Context, index *corev1.Secret, pieces []chunkPiece) error {
	for i, p := range pieces[1:] {
		_, err := d.impl.Create(ctx, d.chunk(index, p), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("failed to create chunk %d of %d %q: %w", i+2, len(pieces), p.name, err)
			}
			continue
		}
		old, err := d.impl.Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("failed to read the existing chunk %q: %w", p.name, err)
		}
		if ownedBy(old, index.UID) {
			continue
		}
		uid := old.UID
		if err := d.impl.Delete(ctx, p.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to replace the chunk %q of another index: %w", p.name, err)
		}
		if _, err := d.impl.Create(ctx, d.chunk(index, p), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("failed to create chunk %d of %d %q: %w", i+2, len(pieces), p.name, err)
		}
	}
	return nil
}

func ownedBy(s *corev1.Secret, uid types.UID) bool {
	for _, r := range s.OwnerReferences {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func (d *chunkedSecrets) Create(key string, rls *helmrelease.Release) error {
	ctx := context.Background()
	pieces, err := d.pieces(key, rls)
	if err != nil {
		return fmt.Errorf("create: failed to encode release %q: %w", rls.Name, err)
	}
	idx := d.index(key, rls, pieces)
	idx.Labels["createdAt"] = strconv.FormatInt(d.now().Unix(), 10)
	created, err := d.impl.Create(ctx, idx.DeepCopy(), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var replaced bool
		if replaced, err = d.replaceTorn(ctx, key); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		if !replaced {
			return driver.ErrReleaseExists
		}
		created, err = d.impl.Create(ctx, idx.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists
		}
	}
	if err != nil {
		return fmt.Errorf("create: failed to create the index %q: %w", key, err)
	}
	if err := d.createChunks(ctx, created, pieces); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	// Its chunks are those it lists (a new index owns no other).
	sweptRecords.Store(created.Namespace+"/"+key, created.ResourceVersion)
	return nil
}

// replaceTorn deletes the index key (and its chunks) if it is a torn
// create, and says whether it did.
func (d *chunkedSecrets) replaceTorn(ctx context.Context, key string) (bool, error) {
	idx, err := d.impl.Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to read the existing index %q: %w", key, err)
	}
	if idx.Type != chunkedIndexType {
		return false, nil
	}
	if _, err := d.decode(ctx, idx); !errors.Is(err, errTornRecord) {
		return false, nil
	}
	d.log.V(1).Info("replacing a torn release record", "record", key)
	uid := idx.UID
	if err := d.impl.Delete(ctx, key, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("failed to delete the torn index %q: %w", key, err)
	}
	if err := d.impl.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: d.chunksOf(key)}); err != nil {
		return false, fmt.Errorf("failed to delete the chunks of the torn index %q: %w", key, err)
	}
	return true, nil
}

func (d *chunkedSecrets) chunksOf(key string) string {
	return kblabels.Set{"owner": d.owner, "key": key, "type": "chunk"}.String()
}

// recordLocks holds a mutex per index Secret (namespace/name) that an
// update holds while it writes, so that a sweep of leftover chunks in the
// same process never deletes the chunks of an update in progress.
var recordLocks sync.Map

func recordLock(ns, key string) *sync.Mutex {
	m, _ := recordLocks.LoadOrStore(ns+"/"+key, new(sync.Mutex))
	return m.(*sync.Mutex)
}

// sweptRecords holds, by index Secret (namespace/name), the
// resourceVersion of the index whose leftover chunks were last deleted.
var sweptRecords sync.Map

func (d *chunkedSecrets) Update(key string, rls *helmrelease.Release) error {
	ctx := context.Background()
	old, err := d.getIndex(ctx, key)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	lock := recordLock(old.Namespace, key)
	lock.Lock()
	defer lock.Unlock()
	// Until it succeeds, its record may have chunks it does not list.
	sweptRecords.Delete(old.Namespace + "/" + key)
	pieces, err := d.pieces(key, rls)
	if err != nil {
		return fmt.Errorf("update: failed to encode release %q: %w", rls.Name, err)
	}
	if err := d.createChunks(ctx, old, pieces); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	idx := d.index(key, rls, pieces)
	idx.Labels["createdAt"] = old.Labels["createdAt"]
	idx.Labels["modifiedAt"] = strconv.FormatInt(d.now().Unix(), 10)
	idx.UID = old.UID
	idx.ResourceVersion = old.ResourceVersion
	idx.OwnerReferences = old.OwnerReferences
	updated, err := d.impl.Update(ctx, idx, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update: failed to update the index %q: %w", key, err)
	}
	// The record is written: chunks left over are harmless (see the type),
	// so a failure to delete them does not fail the update.
	keep := map[string]bool{}
	for _, p := range pieces[1:] {
		keep[p.name] = true
	}
	list, err := d.impl.List(ctx, metav1.ListOptions{LabelSelector: d.chunksOf(key)})
	if err != nil {
		d.log.V(1).Info("leaving the old chunks of a release record", "record", key, "error", err.Error())
		return nil
	}
	for i := range list.Items {
		c := &list.Items[i]
		if keep[c.Name] {
			continue
		}
		uid := c.UID
		if err := d.impl.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			d.log.V(1).Info("leaving an old chunk of a release record", "record", key, "chunk", c.Name, "error", err.Error())
			return nil
		}
	}
	sweptRecords.Store(updated.Namespace+"/"+key, updated.ResourceVersion)
	return nil
}

// sweepLeftovers deletes the chunk Secrets of the (whole, decoded) index
// Secrets idxs that they do not list, for those not swept at their
// current resourceVersion by this process yet: one list of their chunks.
// A failure leaves the chunks (harmless) for the next read.
func (d *chunkedSecrets) sweepLeftovers(ctx context.Context, idxs []*corev1.Secret) {
	byKey := map[string]*corev1.Secret{}
	for _, idx := range idxs {
		if rv, ok := sweptRecords.Load(idx.Namespace + "/" + idx.Name); !ok || rv != idx.ResourceVersion {
			byKey[idx.Name] = idx
		}
	}
	if len(byKey) == 0 {
		return
	}
	keys, err := kblabels.NewRequirement("key", selection.In, slices.Sorted(maps.Keys(byKey)))
	if err != nil {
		return
	}
	sel := kblabels.SelectorFromSet(kblabels.Set{"owner": d.owner, "type": "chunk"}).Add(*keys)
	list, err := d.impl.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		d.log.V(1).Info("not sweeping the leftover chunks of release records", "error", err.Error())
		return
	}
	failed := map[string]bool{}
	for i := range list.Items {
		c := &list.Items[i]
		idx := byKey[c.Labels["key"]]
		if idx == nil || d.lists(idx, c.Name) {
			continue
		}
		lock := recordLock(idx.Namespace, idx.Name)
		if !lock.TryLock() {
			failed[idx.Name] = true // an update runs: its own chunks
			continue
		}
		uid := c.UID
		err := d.impl.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		lock.Unlock()
		if err != nil && !apierrors.IsNotFound(err) {
			d.log.V(1).Info("leaving a leftover chunk of a release record", "record", idx.Name, "chunk", c.Name, "error", err.Error())
			failed[idx.Name] = true
		}
	}
	for key, idx := range byKey {
		if !failed[key] {
			sweptRecords.Store(idx.Namespace+"/"+key, idx.ResourceVersion)
		}
	}
}

// lists says whether the index Secret idx lists the chunk name.
func (d *chunkedSecrets) lists(idx *corev1.Secret, name string) bool {
	var extra []string
	if err := json.Unmarshal(idx.Data["extraChunks"], &extra); err != nil {
		return true // not ours to judge
	}
	return slices.Contains(extra, name)
}

func (d *chunkedSecrets) Delete(key string) (*helmrelease.Release, error) {
	ctx := context.Background()
	idx, err := d.getIndex(ctx, key)
	if err != nil {
		return nil, err
	}
	rls, err := d.decode(ctx, idx)
	if errors.Is(err, errTornRecord) {
		return nil, driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("delete: failed to decode release from index secret %q: %w", key, err)
	}
	sel := kblabels.Set{"owner": d.owner, "key": key}.String()
	if err := d.impl.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return nil, fmt.Errorf("delete: failed to delete index secret %q: %w", key, err)
	}
	sweptRecords.Delete(idx.Namespace + "/" + key)
	return rls, nil
}

// getIndex reads the index Secret key (driver.ErrReleaseNotFound: none).
func (d *chunkedSecrets) getIndex(ctx context.Context, key string) (*corev1.Secret, error) {
	s, err := d.impl.Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get secret for key %q: %w", key, err)
	}
	return s, nil
}

func (d *chunkedSecrets) Get(key string) (*helmrelease.Release, error) {
	ctx := context.Background()
	idx, err := d.getIndex(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	rls, err := d.decode(ctx, idx)
	if errors.Is(err, errTornRecord) {
		return nil, fmt.Errorf("get: %w", driver.ErrReleaseNotFound)
	}
	if errorsAsInvalid(err) {
		return nil, err // it names the record
	}
	if err != nil {
		return nil, fmt.Errorf("get: failed to decode release from index secret %q: %w", key, err)
	}
	return rls, nil
}

func (d *chunkedSecrets) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	ctx := context.Background()
	sel := kblabels.Set{"owner": d.owner, "type": "index"}.String()
	list, err := d.impl.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	var out []*helmrelease.Release
	for i := range list.Items {
		idx := &list.Items[i]
		rls, err := d.decode(ctx, idx)
		if errors.Is(err, errTornRecord) {
			d.log.V(1).Info("skipping a torn release record", "record", idx.Name)
			continue
		}
		if errorsAsInvalid(err) {
			// This list is the namespace's: the record is its release's to
			// report (Query).
			d.log.V(1).Info("skipping a release record past a bound", "record", idx.Name, "error", err.Error())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list: failed to decode release for key %q: %w", idx.Labels["key"], err)
		}
		rls.Labels = idx.Labels
		if filter(rls) {
			out = append(out, rls)
		}
	}
	return out, nil
}

// Query selects the index Secrets by the query's system labels, then the
// releases by the others (which only the records hold). owner=helm, which
// Helm's actions ask for, is taken for this driver's owner.
func (d *chunkedSecrets) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	ctx := context.Background()
	server := kblabels.Set{"owner": d.owner, "type": "index"}
	client := kblabels.Set{}
	for k, v := range labels {
		switch {
		case k == "owner" && v == "helm":
			server[k] = d.owner
		case slices.Contains(chunkedSystemLabels, k):
			server[k] = v
		default:
			client[k] = v
		}
	}
	sel, err := kblabels.ValidatedSelectorFromSet(server)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	list, err := d.impl.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	out := make([]*helmrelease.Release, 0, len(list.Items))
	whole := make([]*corev1.Secret, 0, len(list.Items))
	defer func() { d.sweepLeftovers(ctx, whole) }()
	for i := range list.Items {
		idx := &list.Items[i]
		rls, err := d.decode(ctx, idx)
		if errors.Is(err, errTornRecord) {
			d.log.V(1).Info("skipping a torn release record", "record", idx.Name)
			continue
		}
		if errorsAsInvalid(err) {
			if labels["name"] != "" {
				return nil, err // it names the record
			}
			// A query of no one release: the record is its release's to
			// report.
			d.log.V(1).Info("skipping a release record past a bound", "record", idx.Name, "error", err.Error())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("query: failed to decode release: %w", err)
		}
		whole = append(whole, idx)
		if client.AsSelector().Matches(kblabels.Set(rls.Labels)) {
			out = append(out, rls)
		}
	}
	if len(out) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}

// decode reads the record of the index Secret idx, its chunks from the
// server: errTornRecord when one of them does not exist. The release's
// labels are those it was written with, but the system labels.
//
// It reads within the bounds of any record (record.go): an index that
// lists more than MaxChunks chunks, or chunks of more data than a revision
// of MaxRecordSize compresses to, is an *InvalidRecordError before any
// chunk past the bound is read; so is a record that decodes past a bound.
func (d *chunkedSecrets) decode(ctx context.Context, idx *corev1.Secret) (*helmrelease.Release, error) {
	extraData, ok := idx.Data["extraChunks"]
	if !ok {
		return nil, fmt.Errorf("index secret %q missing chunks data", idx.Name)
	}
	var extra []string
	if err := json.Unmarshal(extraData, &extra); err != nil {
		return nil, fmt.Errorf("failed to parse chunk names from index: %w", err)
	}
	if most := MaxChunks(d.chunkSize); 1+len(extra) > most {
		return nil, &InvalidRecordError{Namespace: idx.Namespace, Name: idx.Name,
			Why: fmt.Sprintf("lists %d chunks, over the %d a revision of %d MiB takes", 1+len(extra), most, MaxRecordSize>>20)}
	}
	first, ok := idx.Data["chunk"]
	if !ok {
		return nil, fmt.Errorf("index secret %q missing chunk 1 data", idx.Name)
	}
	z := make([]byte, 0, len(first)*(1+len(extra))) // all but the last are as long
	z = append(z, first...)
	for i, name := range extra {
		c, err := d.impl.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("chunk %d secret %q: %w", i+2, name, errTornRecord)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to get chunk %d secret %q: %w", i+2, name, err)
		}
		data, ok := c.Data["chunk"]
		if !ok {
			return nil, fmt.Errorf("chunk %d secret %q missing chunk data", i+2, name)
		}
		if len(z)+len(data) > MaxChunks(d.chunkSize)*d.chunkSize {
			return nil, &InvalidRecordError{Namespace: idx.Namespace, Name: idx.Name, Why: errPastSize.Error()}
		}
		z = append(z, data...)
	}
	r, _ := gzipReaders.Get().(*gzip.Reader)
	if r == nil {
		r = new(gzip.Reader)
	}
	defer gzipReaders.Put(r)
	var buf bytes.Buffer
	js, err := gunzip(r, z, &buf)
	if err != nil {
		if err = invalid(idx, err); errorsAsInvalid(err) {
			return nil, err
		}
		return nil, fmt.Errorf("failed to decode release: %w", err)
	}
	if jsonValues(js, MaxRecordValues) > MaxRecordValues {
		return nil, invalid(idx, errTooManyValues)
	}
	var rec chunkedRecord
	if err := json.Unmarshal(js, &rec); err != nil {
		return nil, fmt.Errorf("failed to decode release: %w", err)
	}
	rls := rec.Release
	rls.Labels = make(map[string]string, len(rec.Labels))
	for k, v := range rec.Labels {
		if !slices.Contains(chunkedSystemLabels, k) {
			rls.Labels[k] = v
		}
	}
	return &rls, nil
}
