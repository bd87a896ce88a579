package operator

import (
	"errors"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// discoveryFailures makes a partial discovery usable and says so once.
//
// An APIService the API server finds unavailable (its Service has no
// endpoint, its server fails the discovery check) leaves its group in the
// cluster's discovery with no resources, marked stale: every client's
// discovery of the whole cluster then ends with ErrGroupDiscoveryFailed
// naming that group beside the groups it did read. The operator uses what
// was read (a chart's .Capabilities then list the group's version but none
// of its kinds, as Helm's own reading has them) and logs each failing group once per
// process, not on every read: the capabilities are read again every
// capabilitiesTTL, and a broken aggregated API may stay broken for days.
// Nothing retries the failed group: the next regular read asks again.
type discoveryFailures struct {
	// log is the process' logger (the manager's): a failing group is the
	// cluster's, not the resource's whose reconcile read it first.
	log logr.Logger

	mu sync.Mutex
	// logged are the groups already logged.
	logged map[string]bool
}

// partial returns nil when err is a partial discovery's error
// (ErrGroupDiscoveryFailed), after logging each failing group not logged
// before by this process; any other error is returned as it is.
func (d *discoveryFailures) partial(err error) error {
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) {
		return err
	}
	gvs := make([]schema.GroupVersion, 0, len(failed.Groups))
	for gv := range failed.Groups {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, gv := range gvs {
		if d.logged[gv.Group] {
			continue
		}
		if d.logged == nil {
			d.logged = map[string]bool{}
		}
		d.logged[gv.Group] = true
		d.log.Info("API group discovery failed: its kinds are left out of the cluster's capabilities until it answers; logged once per process",
			"group", gv.Group, "version", gv.Version, "error", failed.Groups[gv].Error())
	}
	return nil
}

// groupsRead is a discovery client that keeps the error of its last
// ServerGroupsAndResources, which a caller that uses a partial discovery
// (Helm's GetVersionSet) does not return.
type groupsRead struct {
	discovery.ServerResourcesInterface
	err error
}

func (g *groupsRead) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	groups, resources, err := g.ServerResourcesInterface.ServerGroupsAndResources()
	g.err = err
	return groups, resources, err
}
