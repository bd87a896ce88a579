package storage_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	hopstorage "github.com/operator-framework/helm-operator-plugins/pkg/storage"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/helmapp/helm-app-operator/internal/storage"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// testChunkSize is the chunk size of these tests: a revision of some
// 200 KiB of random text is 4 chunks.
const testChunkSize = 64 << 10

// stoppingSecrets is a Secrets client that performs the first n writes
// (create, update, delete, delete collection, patch) and fails every later
// one without sending it, as a process killed after its nth write would
// not write again. Reads pass. (A delete collection is one write here: the
// server deletes its Secrets one by one, a stop inside it is not
// injected.)
type stoppingSecrets struct {
	corev1client.SecretInterface
	mu     sync.Mutex
	n      int
	writes int
	// stopped is set when a write was refused.
	stopped bool
}

var errStopped = errors.New("stopped: the process was killed")

func (s *stoppingSecrets) write() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writes >= s.n {
		s.stopped = true
		return errStopped
	}
	s.writes++
	return nil
}

func (s *stoppingSecrets) Create(ctx context.Context, in *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	if err := s.write(); err != nil {
		return nil, err
	}
	return s.SecretInterface.Create(ctx, in, o)
}

func (s *stoppingSecrets) Update(ctx context.Context, in *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if err := s.write(); err != nil {
		return nil, err
	}
	return s.SecretInterface.Update(ctx, in, o)
}

func (s *stoppingSecrets) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.SecretInterface.Delete(ctx, name, o)
}

func (s *stoppingSecrets) DeleteCollection(ctx context.Context, o metav1.DeleteOptions, l metav1.ListOptions) error {
	if err := s.write(); err != nil {
		return err
	}
	return s.SecretInterface.DeleteCollection(ctx, o, l)
}

func (s *stoppingSecrets) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*corev1.Secret, error) {
	if err := s.write(); err != nil {
		return nil, err
	}
	return s.SecretInterface.Patch(ctx, name, pt, data, o, sub...)
}

// bigRelease is revision version of release name with a manifest of
// random text (seed), 4 or more chunks of testChunkSize when gzipped.
func bigRelease(t *testing.T, name string, version int, status release.Status, seed int64) *release.Release {
	rel := storedRelease(t, name, version, status, false)
	b := make([]byte, 250<<10)
	rand.New(rand.NewSource(seed)).Read(b)
	rel.Manifest = base64.StdEncoding.EncodeToString(b)
	return rel
}

// sameRelease says how got differs from want, by what a user sees of a
// revision.
func sameRelease(got, want *release.Release) error {
	switch {
	case got.Name != want.Name || got.Version != want.Version:
		return fmt.Errorf("read %s v%d, want %s v%d", got.Name, got.Version, want.Name, want.Version)
	case got.Info.Status != want.Info.Status:
		return fmt.Errorf("read %s v%d %s, want %s", got.Name, got.Version, got.Info.Status, want.Info.Status)
	case got.Manifest != want.Manifest:
		return fmt.Errorf("read %s v%d with another manifest", got.Name, got.Version)
	}
	return nil
}

// readRecord reads key and the history of name with a fresh driver: nil
// when there is no record, an error when the reads disagree or fail.
func readRecord(sc corev1client.SecretInterface, name, key string) (*release.Release, error) {
	d := storage.NewChunkedSecrets(sc, testChunkSize)
	got, gerr := d.Get(key)
	hist, qerr := d.Query(map[string]string{"name": name, "owner": "helm"})
	all, lerr := d.List(func(r *release.Release) bool { return r.Name == name })
	switch {
	case lerr != nil:
		return nil, fmt.Errorf("List: %w", lerr)
	case errors.Is(gerr, driver.ErrReleaseNotFound) && errors.Is(qerr, driver.ErrReleaseNotFound) && len(all) == 0:
		return nil, nil
	case gerr != nil:
		return nil, fmt.Errorf("Get: %w", gerr)
	case qerr != nil:
		return nil, fmt.Errorf("Query: %w", qerr)
	case len(hist) != 1 || len(all) != 1:
		return nil, fmt.Errorf("Query read %d revisions and List %d, Get one", len(hist), len(all))
	}
	for _, r := range []*release.Release{hist[0], all[0]} {
		if err := sameRelease(r, got); err != nil {
			return nil, fmt.Errorf("Query or List and Get disagree: %w", err)
		}
	}
	return got, nil
}

// listedChunks is the number of chunk Secrets the index Secret key lists.
func listedChunks(t *testing.T, sc corev1client.SecretInterface, key string) int {
	t.Helper()
	var names []string
	if err := json.Unmarshal(getSecret(t, sc, key).Data["extraChunks"], &names); err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// chunkSecrets is the names of the chunk Secrets of key.
func chunkSecrets(t *testing.T, sc corev1client.SecretInterface, key string) []string {
	t.Helper()
	list, err := sc.List(context.Background(), metav1.ListOptions{LabelSelector: "type=chunk,key=" + key})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

// A process killed after any write of the chunked driver's create, update
// or delete of a revision of 4 or more chunks leaves a record that a fresh driver
// reads as the revision before or the revision after, never an error (Get,
// Query and List agree), and the next action on it succeeds: a create of
// the revision where there is none (over a torn create), an update, a
// delete. The chunks an update left that its index does not list are gone
// after the next read of the history (a Query).
// (helm-operator-plugins' driver, stopped the same way, leaves an index
// naming chunks that do not exist: "failed to get chunk 3 secret".)
func TestChunkedDriverSurvivesAStopAfterEveryWrite(t *testing.T) {
	c := tu.Client(t, cfg)
	sc := secretsClient(t, tu.Namespace(t, c, "chunked-stops"))
	steps := map[string]int{}
	for _, op := range []string{"create", "update", "delete"} {
		for k := 0; ; k++ {
			name := fmt.Sprintf("%s%d", op, k)
			key := "sh.helm.release.v1." + name + ".v1"
			a := bigRelease(t, name, 1, release.StatusPendingInstall, 1)
			b := bigRelease(t, name, 1, release.StatusDeployed, 2)
			if op != "create" {
				if err := storage.NewChunkedSecrets(sc, testChunkSize).Create(key, a); err != nil {
					t.Fatal(err)
				}
			}
			stopping := &stoppingSecrets{SecretInterface: sc, n: k}
			d := storage.NewChunkedSecrets(stopping, testChunkSize)
			var err error
			var after *release.Release // the record if the action completed
			switch op {
			case "create":
				err, after = d.Create(key, a), a
			case "update":
				err, after = d.Update(key, b), b
			case "delete":
				_, err = d.Delete(key)
			}
			got, rerr := readRecord(sc, name, key)
			if rerr != nil {
				t.Fatalf("%s stopped after write %d: the record reads as an error: %v", op, k, rerr)
			}
			var before *release.Release
			if op != "create" {
				before = a
			}
			switch {
			case got == nil && (before == nil || after == nil):
			case got != nil && before != nil && sameRelease(got, before) == nil:
			case got != nil && after != nil && sameRelease(got, after) == nil:
			default:
				t.Fatalf("%s stopped after write %d: read %v, want the revision before (%v) or after (%v)", op, k, got != nil, before != nil, after != nil)
			}
			if err == nil && (got == nil) != (after == nil) {
				t.Fatalf("%s completed with %d writes, but the record reads as if it did not", op, k)
			}
			// The read (a Query) deleted the chunks the index does not list.
			if got != nil {
				if n, want := len(chunkSecrets(t, sc, key)), listedChunks(t, sc, key); n != want {
					t.Errorf("%s stopped after write %d: %d chunk Secrets after a read, want the %d its index lists", op, k, n, want)
				}
			}

			// The next action.
			next := storage.NewChunkedSecrets(sc, testChunkSize)
			c := bigRelease(t, name, 1, release.StatusSuperseded, 3)
			if got == nil {
				if err := next.Create(key, c); err != nil {
					t.Fatalf("%s stopped after write %d: the next create: %v", op, k, err)
				}
			} else if err := next.Update(key, c); err != nil {
				t.Fatalf("%s stopped after write %d: the next update: %v", op, k, err)
			}
			if got, err := readRecord(sc, name, key); err != nil || got == nil || sameRelease(got, c) != nil {
				t.Fatalf("%s stopped after write %d: after the next action the record reads %v, %v", op, k, got != nil, err)
			}
			if n, want := len(chunkSecrets(t, sc, key)), listedChunks(t, sc, key); n != want || n < 2 {
				t.Errorf("%s stopped after write %d: %d chunk Secrets after the next action, want the %d its index lists", op, k, n, want)
			}
			if _, err := next.Delete(key); err != nil {
				t.Fatalf("%s stopped after write %d: deleting the record: %v", op, k, err)
			}
			if !stopping.stopped {
				steps[op] = k
				break
			}
			if k > 20 {
				t.Fatalf("%s still stopping after %d writes", op, k)
			}
		}
	}
	t.Logf("writes per action: %v", steps)
}

// helm-operator-plugins' chunked driver and ours read each other's records
// (a revision of 4 or more chunks, created and then updated by one, read by the
// other), and ours updates and deletes a record of theirs.
func TestChunkedDriverReadsAndIsReadByHelmOperatorPlugins(t *testing.T) {
	c := tu.Client(t, cfg)
	sc := secretsClient(t, tu.Namespace(t, c, "chunked-interop"))
	hop := hopstorage.NewChunkedSecrets(sc, "helm-app-operator", hopstorage.ChunkedSecretsConfig{ChunkSize: testChunkSize})
	ours := storage.NewChunkedSecrets(sc, testChunkSize)
	for _, w := range []struct {
		name           string
		writer, reader driver.Driver
	}{{"ours", ours, hop}, {"theirs", hop, ours}} {
		key := "sh.helm.release.v1." + w.name + ".v1"
		a := bigRelease(t, w.name, 1, release.StatusDeployed, 1)
		a.Labels = map[string]string{"team": "blue"}
		if err := w.writer.Create(key, a); err != nil {
			t.Fatal(err)
		}
		b := bigRelease(t, w.name, 1, release.StatusSuperseded, 2)
		b.Labels = map[string]string{"team": "blue"}
		for _, rel := range []*release.Release{a, b} {
			if rel == b {
				if err := w.writer.Update(key, b); err != nil {
					t.Fatal(err)
				}
			}
			got, err := w.reader.Get(key)
			if err != nil {
				t.Fatalf("%s record read by the other driver: %v", w.name, err)
			}
			if err := sameRelease(got, rel); err != nil || got.Labels["team"] != "blue" {
				t.Errorf("%s record read by the other driver: %v, labels %v", w.name, err, got.Labels)
			}
			hist, err := w.reader.Query(map[string]string{"name": w.name, "owner": "helm", "team": "blue"})
			if err != nil || len(hist) != 1 || sameRelease(hist[0], rel) != nil {
				t.Errorf("%s record queried by the other driver: %d, %v", w.name, len(hist), err)
			}
		}
		if n, want := len(chunkSecrets(t, sc, key)), listedChunks(t, sc, key); n != want || n < 2 {
			t.Errorf("%s record: %d chunk Secrets after the update, want the %d its index lists", w.name, n, want)
		}
		// The reader updates and deletes the writer's record.
		d := bigRelease(t, w.name, 1, release.StatusDeployed, 4)
		if err := w.reader.Update(key, d); err != nil {
			t.Fatalf("%s record updated by the other driver: %v", w.name, err)
		}
		if got, err := w.writer.Get(key); err != nil || sameRelease(got, d) != nil {
			t.Errorf("%s record read back after the other driver's update: %v", w.name, err)
		}
		if _, err := w.reader.Delete(key); err != nil {
			t.Fatalf("%s record deleted by the other driver: %v", w.name, err)
		}
		if _, err := w.writer.Get(key); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("%s record after the other driver's delete: %v, want not found", w.name, err)
		}
		if n := len(chunkSecrets(t, sc, key)); n != 0 {
			t.Errorf("%s record: %d chunk Secrets after the delete", w.name, n)
		}
	}
}
