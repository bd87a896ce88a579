package storage

import (
	"errors"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// countingDriver is Helm's in-memory driver, counting the queries that reach
// it; failNext makes the next one fail.
type countingDriver struct {
	driver.Driver
	queries  int
	failNext bool
}

func (d *countingDriver) Query(l map[string]string) ([]*release.Release, error) {
	d.queries++
	if d.failNext {
		d.failNext = false
		return nil, errors.New("injected: listing failed")
	}
	return d.Driver.Query(l)
}

func rev(name string, v int, st release.Status) *release.Release {
	return &release.Release{Name: name, Namespace: "ns", Version: v, Info: &release.Info{Status: st},
		Labels: map[string]string{"team": "a"}}
}

func TestMemoDriver(t *testing.T) {
	inner := &countingDriver{Driver: driver.NewMemory()}
	m := newMemoDriver(inner)
	s := storage.Init(m)
	if err := s.Create(rev("web", 1, release.StatusDeployed)); err != nil {
		t.Fatal(err)
	}

	// Repeated histories are listed once.
	inner.queries = 0
	first, err := s.History("web")
	if err != nil || len(first) != 1 {
		t.Fatalf("history: %v, %v", first, err)
	}
	second, err := s.History("web")
	if err != nil || len(second) != 1 || second[0].Version != 1 || second[0].Info.Status != release.StatusDeployed {
		t.Fatalf("remembered history: %v, %v", second, err)
	}
	if second[0].Labels["team"] != "a" {
		t.Errorf("remembered labels %v, want the release's", second[0].Labels)
	}
	if _, err := s.Last("web"); err != nil {
		t.Fatal(err)
	}
	if inner.queries != 1 {
		t.Errorf("%d queries reached the driver for three histories, want 1", inner.queries)
	}

	// What Helm does to an answer does not change the next one.
	second[0].Info.Status = release.StatusSuperseded
	second[0].Labels["team"] = "b"
	first[0].Info.Description = "changed by its reader"
	third, err := s.History("web")
	if err != nil {
		t.Fatal(err)
	}
	if third[0].Info.Status != release.StatusDeployed || third[0].Labels["team"] != "a" || third[0].Info.Description != "" {
		t.Errorf("a changed answer leaked into the memo: %+v, labels %v", third[0].Info, third[0].Labels)
	}

	// A write forgets: the next history is listed, and shows the write.
	if err := s.Create(rev("web", 2, release.StatusPendingUpgrade)); err != nil {
		t.Fatal(err)
	}
	inner.queries = 0
	h, err := s.History("web")
	if err != nil || len(h) != 2 || inner.queries != 1 {
		t.Errorf("after a create: %d revisions, %d queries, err %v; want 2 revisions listed anew", len(h), inner.queries, err)
	}
	if err := s.Update(rev("web", 2, release.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	inner.queries = 0
	if last, err := s.Last("web"); err != nil || last.Info.Status != release.StatusDeployed || inner.queries != 1 {
		t.Errorf("after an update: last %+v, %d queries, err %v; want revision 2 deployed, listed anew", last, inner.queries, err)
	}
	if _, err := s.Delete("web", 1); err != nil {
		t.Fatal(err)
	}
	inner.queries = 0
	if h, err := s.History("web"); err != nil || len(h) != 1 || inner.queries != 1 {
		t.Errorf("after a delete: %d revisions, %d queries, err %v; want 1 revision listed anew", len(h), inner.queries, err)
	}
	// A failed write forgets too: it may have landed.
	if err := s.Update(rev("web", 9, release.StatusDeployed)); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("updating a missing revision: %v", err)
	}
	inner.queries = 0
	if _, err := s.History("web"); err != nil || inner.queries != 1 {
		t.Errorf("after a failed update: %d queries, err %v; want a new list", inner.queries, err)
	}

	// "Not found" is an answer like any other; a failure is not.
	inner.queries = 0
	for range 2 {
		if _, err := s.History("other"); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("history of a missing release: %v, want not found", err)
		}
	}
	if inner.queries != 1 {
		t.Errorf("%d queries for two histories of a missing release, want 1", inner.queries)
	}
	inner.queries, inner.failNext = 0, true
	if _, err := s.History("third"); err == nil {
		t.Fatal("the injected failure did not reach the caller")
	}
	if _, err := s.History("third"); !errors.Is(err, driver.ErrReleaseNotFound) || inner.queries != 2 {
		t.Errorf("after a failed list: %d queries, err %v; want the failure forgotten and a new list", inner.queries, err)
	}

	// Other labels are other answers.
	inner.queries = 0
	if _, err := s.Deployed("web"); err != nil || inner.queries != 1 {
		t.Errorf("deployed: %d queries, err %v; want its own list", inner.queries, err)
	}
}
