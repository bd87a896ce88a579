package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Sharding splits the resources between operator instances by a label
// (docs/sharding.md): an instance started with --watch-label-selector caches
// only the resources the selector selects, only their labelled release
// objects, and only their Helm release records, and it carries the
// selector's label keys from each resource to its release objects and
// release labels, so that each instance's caches hold only its own.
type shard struct {
	// selector is nil without --watch-label-selector: nothing is scoped.
	selector labels.Selector
	// keys are the label keys the selector's requirements name, sorted.
	keys []string
}

// parseShard reads --watch-label-selector; empty means no sharding.
func parseShard(s string) (shard, error) {
	if s == "" {
		return shard{}, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return shard{}, fmt.Errorf("--watch-label-selector %q is not a label selector: %w", s, err)
	}
	reqs, _ := sel.Requirements()
	if len(reqs) == 0 {
		return shard{}, fmt.Errorf("--watch-label-selector %q selects everything; leave it empty instead", s)
	}
	var keys []string
	for _, r := range reqs {
		if !slices.Contains(keys, r.Key()) {
			keys = append(keys, r.Key())
		}
	}
	slices.Sort(keys)
	return shard{selector: sel, keys: keys}, nil
}

// leaseID is the leader-election ID of the shard: id itself without a
// selector, else id with a short hash of the selector appended, so that the
// instances of different shards do not contend for one Lease while replicas
// of one shard still do.
func (s shard) leaseID(id string) string {
	if s.selector == nil {
		return id
	}
	sum := sha256.Sum256([]byte(s.selector.String()))
	return id + "-" + hex.EncodeToString(sum[:])[:10]
}

// and is the selector base restricted to the shard as well.
func (s shard) and(base labels.Selector) labels.Selector {
	if s.selector == nil {
		return base
	}
	reqs, _ := s.selector.Requirements()
	return base.Add(reqs...)
}

// scope restricts every cache of the manager to the shard: the watched
// resources (the default selector) and each object kind with its own
// selector (Helm's release records) alike.
func (s shard) scope(o *cache.Options) {
	if s.selector == nil {
		return
	}
	o.DefaultLabelSelector = s.selector
	for obj, by := range o.ByObject {
		if by.Label != nil {
			by.Label = s.and(by.Label)
		} else {
			by.Label = s.selector
		}
		o.ByObject[obj] = by
	}
}

// labelsOf are the values of the shard's keys on a resource's labels; keys
// the resource lacks are absent.
func (s shard) labelsOf(l map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range s.keys {
		if v, ok := l[k]; ok {
			out[k] = v
		}
	}
	return out
}
