package release

import (
	"context"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/storage"
)

// Restart preload (issue 27 item 5). A new process starts with an empty
// memo: without more, the first reconcile of each settled resource reads
// its release's latest record alone, one request per resource. With a
// loader, the first miss of the memo in a namespace for a revision this
// process did not write (one it wrote was read back after its action)
// lists the namespace's deployed Helm records once, in pages, and keeps
// each, decoded as Helm's Secrets driver decodes it (by the storage's one
// decoder, storage.DecodeSecret, within its bounds) and trimmed as the memo
// trims, under its release with the name and resourceVersion of its Secret.
// A later miss for the same release takes it from there when the metadata
// cache shows the same Secret at the same resourceVersion, and
// ObserveSettled checks it as it checks what it reads alone: a record
// written while no operator ran (a newer revision, or any write to the
// record) does not match and is read as before. Concurrent first misses in
// a namespace wait for the one list; a list that fails (forbidden, or the
// server unavailable) leaves what it did not get to the per-record read,
// and is not tried again by this process. The chunked driver's records are
// not listed: they are read alone. What no reconcile took within
// preloadTTL is dropped, so that the memory held stays what the memo holds
// of the releases reconciled.

// A Loader lists the deployed release records of namespace ns, handing
// each Secret to add as it arrives (a page at a time), and returns the
// list's error, if any, after handing over what it got.
type Loader func(ctx context.Context, ns string, add func(*corev1.Secret)) error

const (
	// preloadTTL is how long the records listed in a namespace wait for the
	// reconcile of their release.
	preloadTTL = 10 * time.Minute
	// preloadTimeout bounds the whole list of one namespace.
	preloadTimeout = 2 * time.Minute
	// PreloadPageSize is the size of each page of the list.
	PreloadPageSize = 100
)

// DeployedRecordSelector selects Helm's Secrets (not the chunked driver's,
// whose revisions stay read one by one) that record a deployed revision.
var DeployedRecordSelector = labels.SelectorFromSet(labels.Set{"owner": "helm", "status": release.StatusDeployed.String()})

// ListDeployed is the Loader that lists, through r (uncached), the Secrets
// of a namespace that sel selects (DeployedRecordSelector, restricted to a
// shard), in pages of PreloadPageSize.
func ListDeployed(r client.Reader, sel labels.Selector) Loader {
	return func(ctx context.Context, ns string, add func(*corev1.Secret)) error {
		cont := ""
		for {
			list := &corev1.SecretList{}
			opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}, client.Limit(PreloadPageSize)}
			if cont != "" {
				opts = append(opts, client.Continue(cont))
			}
			if err := r.List(ctx, list, opts...); err != nil {
				return err
			}
			for i := range list.Items {
				add(&list.Items[i])
			}
			if cont = list.Continue; cont == "" {
				return nil
			}
		}
	}
}

// preload is what the list of one namespace left for the reconciles.
type preload struct {
	done chan struct{}
	// byRelease holds the listed revisions not taken yet, by release name;
	// nil once dropped.
	byRelease map[string]memoEntry
}

// preloaded is the revision of release ns/name that the namespace's list
// found in Secret key at resourceVersion rv, nil if none; the first call in
// a namespace lists it (and the calls meanwhile wait). A revision returned
// is the memo's from then on.
func (m *Memo) preloaded(ns, name, key, rv string) *release.Release {
	if m.load == nil {
		return nil
	}
	m.mu.Lock()
	p, ok := m.pre[ns]
	if !ok {
		p = &preload{done: make(chan struct{}), byRelease: map[string]memoEntry{}}
		m.pre[ns] = p
	}
	m.mu.Unlock()
	if !ok {
		m.fill(ns, p)
	}
	<-p.done
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := p.byRelease[name]
	if !ok {
		return nil
	}
	// Taken or outdated, it is not kept here any longer.
	delete(p.byRelease, name)
	if e.key != key || e.resourceVersion != rv {
		return nil
	}
	m.m[ns+"/"+name] = e
	return copyRelease(e.rel)
}

// fill lists namespace ns into p, then tells the waiters.
func (m *Memo) fill(ns string, p *preload) {
	defer close(p.done)
	ctx, cancel := context.WithTimeout(context.Background(), preloadTimeout)
	defer cancel()
	err := m.load(ctx, ns, func(s *corev1.Secret) {
		name := s.Labels["name"]
		if name == "" {
			return
		}
		// Within the storage's bounds: a record past one (a forged
		// record of any release of the namespace) costs what the bound
		// allows, and is left to its release's own read, which reports
		// it (storage.InvalidRecordError).
		rel, err := storage.DecodeSecret(s)
		if err != nil || rel.Chart == nil {
			return // read alone, if ever needed
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if prev, ok := p.byRelease[name]; ok && prev.rel.Version > rel.Version {
			return
		}
		p.byRelease[name] = memoEntry{key: s.Name, resourceVersion: s.ResourceVersion, rel: trimmed(rel)}
	})
	if err != nil && m.loadFailed != nil {
		m.loadFailed(ns, err)
	}
	time.AfterFunc(preloadTTL, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		p.byRelease = nil
	})
}
