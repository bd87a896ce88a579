package metrics

import (
	"context"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// ActionClientGetter wraps g so that the Helm actions of the clients it
// returns (install, upgrade, uninstall and reconcile, the re-apply of a
// drifted release) are timed into helmapp_helm_action_duration_seconds. Reads
// (get, history) are not timed. A nil Recorder returns g.
func (r *Recorder) ActionClientGetter(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	if r == nil {
		return g
	}
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := g.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &timedClient{ActionInterface: ac, rec: r, kind: obj.GetObjectKind().GroupVersionKind().Kind}, nil
	})
}

// timedClient is a real Helm action client whose actions are timed.
type timedClient struct {
	helmclient.ActionInterface
	rec  *Recorder
	kind string
}

func (c *timedClient) observe(action string, start time.Time, err error) {
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeFailure
	}
	c.rec.actions.WithLabelValues(c.kind, action, outcome).Observe(time.Since(start).Seconds())
}

func (c *timedClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.observe(status.ActionInstall, start, err)
	return rel, err
}

func (c *timedClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	c.observe(status.ActionUpgrade, start, err)
	return rel, err
}

func (c *timedClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	start := time.Now()
	res, err := c.ActionInterface.Uninstall(name, opts...)
	c.observe(status.ActionUninstall, start, err)
	return res, err
}

func (c *timedClient) Reconcile(rel *release.Release) error {
	start := time.Now()
	err := c.ActionInterface.Reconcile(rel)
	c.observe(status.ActionReconcile, start, err)
	return err
}
