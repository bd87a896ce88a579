package operator

import (
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	rel "github.com/helmapp/helm-app-operator/internal/release"
)

// ownWritesDriver is Helm's storage driver of one action configuration,
// which tells the process' memory of writes (release.Writes) about every
// write before it is sent: the watch on Helm's storage then knows the
// event it causes for this process' own, and wakes nobody with it.
type ownWritesDriver struct {
	driver.Driver
	writes    *rel.Writes
	namespace string
}

func (d ownWritesDriver) Create(key string, rls *release.Release) error {
	d.writes.Wrote(d.namespace, key, statusLabel(rls))
	return d.Driver.Create(key, rls)
}

func (d ownWritesDriver) Update(key string, rls *release.Release) error {
	d.writes.Wrote(d.namespace, key, statusLabel(rls))
	return d.Driver.Update(key, rls)
}

func (d ownWritesDriver) Delete(key string) (*release.Release, error) {
	d.writes.Wrote(d.namespace, key, "")
	return d.Driver.Delete(key)
}

// statusLabel is the status Helm's Secret driver labels the record with.
func statusLabel(rls *release.Release) string {
	if rls == nil || rls.Info == nil {
		return ""
	}
	return rls.Info.Status.String()
}

// AssumeNoHistory passes release.NoHistoryAssumer down.
func (d ownWritesDriver) AssumeNoHistory(name string) bool {
	a, ok := d.Driver.(rel.NoHistoryAssumer)
	return ok && a.AssumeNoHistory(name)
}
