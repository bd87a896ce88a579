package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/labels"
)

// memoDriver is Helm's storage driver of one action configuration, which
// lists the same thing once as long as nothing was written through it.
//
// HOP builds one action configuration per reconcile. Within it Helm reads a
// release's history several times before it writes anything: an install
// after our observation (release.Observe) lists it again to check that the
// name is free and again to find a revision to replace; an upgrade lists it
// for the last revision and again to make room under MaxHistory. A Query
// for the same labels as an earlier one is answered with that earlier
// answer, as long as this configuration has written nothing since: every
// Create, Update and Delete through it forgets all answers, whether it
// succeeded or not (a failed write may have landed). So the first list of a
// configuration and every list after a write go to the driver; the Secrets
// driver (helmSecrets) answers a list after its own writes from its first
// list and those writes as the server returned them, so the read-back after
// an action is a real list only when a write failed. List (by a filter
// function), Get and writes go straight to the driver.
//
// Truth: a memoized answer can hide a revision that someone else (a helm
// CLI, another operator) wrote between two lists of one reconcile, which are
// milliseconds apart. That window was already there: our ownership check and
// Helm's own name check read the history and act on it later, with no lock
// between the read and the write. The memo does not widen it beyond the one
// action; the next reconcile starts with a real list. The read-back that the
// status is written from is the first list plus this configuration's writes:
// a revision written by someone else during the action is not in it, and its
// watch event (not this process' own) reconciles the resource again.
//
// Answers are kept as copies and handed out as copies, because Helm changes
// the releases it gets from History (it sets their Info); a copy is the
// release as the Secret driver decodes it (its JSON) with its labels.
//
// It wraps the driver the fault-injection hook (Config.WrapStorage)
// returned, from outside: an injected failing list is an error, which is
// never memoized, and reaches Helm as it would from the server; a list the
// memo answers does not reach the server, in tests as in production.
type memoDriver struct {
	driver.Driver

	mu sync.Mutex
	// gen counts writes begun and ended; an answer is kept only if no write
	// began or ended while it was being listed.
	gen     uint64
	answers map[string]memoAnswer
}

// memoAnswer is one Query's answer: the releases, encoded, and their
// labels, or Helm's "release not found" error.
type memoAnswer struct {
	releases [][]byte
	labels   []map[string]string
	err      error
}

// Memoize is d under a memo of its lists (memoDriver), for one action
// configuration.
func Memoize(d driver.Driver) driver.Driver { return newMemoDriver(d) }

func newMemoDriver(d driver.Driver) *memoDriver {
	return &memoDriver{Driver: d, answers: map[string]memoAnswer{}}
}

// Query answers from the memo when it can, else from the driver.
func (m *memoDriver) Query(keyvals map[string]string) ([]*release.Release, error) {
	key := labels.Set(keyvals).String()
	m.mu.Lock()
	a, ok := m.answers[key]
	gen := m.gen
	m.mu.Unlock()
	if ok {
		return a.decode()
	}
	rels, err := m.Driver.Query(keyvals)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return rels, err
	}
	a, encErr := encodeAnswer(rels, err)
	if encErr != nil {
		// Not kept; the caller has its answer all the same.
		return rels, err
	}
	m.mu.Lock()
	if m.gen == gen {
		m.answers[key] = a
	}
	m.mu.Unlock()
	return rels, err
}

func (m *memoDriver) Create(key string, rls *release.Release) error {
	defer m.forget()
	m.forget()
	return m.Driver.Create(key, rls)
}

func (m *memoDriver) Update(key string, rls *release.Release) error {
	defer m.forget()
	m.forget()
	return m.Driver.Update(key, rls)
}

func (m *memoDriver) Delete(key string) (*release.Release, error) {
	defer m.forget()
	m.forget()
	return m.Driver.Delete(key)
}

// forget drops every answer; it is called as a write begins and as it ends,
// so that no list that overlapped the write is kept.
func (m *memoDriver) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	clear(m.answers)
}

func encodeAnswer(rels []*release.Release, notFound error) (memoAnswer, error) {
	a := memoAnswer{err: notFound}
	for _, r := range rels {
		b, err := json.Marshal(r)
		if err != nil {
			return memoAnswer{}, err
		}
		a.releases = append(a.releases, b)
		a.labels = append(a.labels, maps.Clone(r.Labels))
	}
	return a, nil
}

// decode returns fresh copies of the answer's releases, or its "release
// not found" error.
func (a memoAnswer) decode() ([]*release.Release, error) {
	if a.err != nil {
		return nil, a.err
	}
	out := make([]*release.Release, 0, len(a.releases))
	for i, b := range a.releases {
		r := &release.Release{}
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("decoding a remembered release: %w", err)
		}
		r.Labels = maps.Clone(a.labels[i])
		out = append(out, r)
	}
	return out, nil
}

// AssumeNoHistory takes release name to have no record (the metadata cache
// shows none, release.NoHistoryAssumer) when the driver below can: Helm's
// history reads of this configuration are answered "not found" from then
// on, until a write.
func (m *memoDriver) AssumeNoHistory(name string) bool {
	m.mu.Lock()
	known := len(m.answers[historyKey(name)].releases) > 0
	m.mu.Unlock()
	a, ok := m.Driver.(noHistoryAssumer)
	if known {
		return false
	}
	if !ok || !a.AssumeNoHistory(name) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers[historyKey(name)] = memoAnswer{err: driver.ErrReleaseNotFound}
	return true
}

// noHistoryAssumer is release.NoHistoryAssumer (this package does not
// import release, which reads records with its decoder).
type noHistoryAssumer interface {
	AssumeNoHistory(name string) bool
}

// historyKey is the memo's key of Helm's history query of release name.
func historyKey(name string) string {
	return labels.Set{"name": name, "owner": "helm"}.String()
}
