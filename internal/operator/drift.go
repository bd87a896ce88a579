package operator

import (
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// driftOf is the drift policy of the watch w (watches.yaml drift).
func driftOf(w watches.Watch) release.DriftPolicy {
	p := release.DriftPolicy{Mode: w.Drift.Mode}
	for _, r := range w.Drift.Ignore {
		i := release.DriftIgnore{Paths: r.Paths, Manager: r.Manager, Subresource: r.Subresource}
		if t := r.Target; t != nil {
			i.Target = release.DriftTarget{APIVersion: t.APIVersion, Kind: t.Kind, Name: t.Name}
		}
		p.Ignore = append(p.Ignore, i)
	}
	return p
}
