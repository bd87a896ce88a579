package operator

import "helm.sh/helm/v3/pkg/kube"

// unprobedKube is Helm's own Kubernetes client without its reachability
// probe. Helm's install, upgrade, rollback and uninstall each begin with
// KubeClient.IsReachable, a GET /version. Every reconcile has just listed
// Helm's storage on the same cluster (release.Observe) before it runs an
// action, so the probe tells nothing new; and a cluster that became
// unreachable since fails the action's first real request with its own
// error, which the reconcile reports as the action's failure.
//
// It embeds the concrete client, so that every optional interface Helm
// v3.22 type-asserts on cfg.KubeClient (InterfaceExt in hooks and
// uninstall, InterfaceThreeWayMerge in install, InterfaceLogs in hooks,
// InterfaceDeletionPropagation in uninstall, InterfaceResources in status)
// still holds; the assertions below keep it so.
type unprobedKube struct {
	*kube.Client
}

var (
	_ kube.Interface                    = unprobedKube{}
	_ kube.InterfaceExt                 = unprobedKube{}
	_ kube.InterfaceThreeWayMerge       = unprobedKube{}
	_ kube.InterfaceLogs                = unprobedKube{}
	_ kube.InterfaceDeletionPropagation = unprobedKube{}
	_ kube.InterfaceResources           = unprobedKube{}
)

// IsReachable reports the cluster reachable without asking it.
func (unprobedKube) IsReachable() error { return nil }

// withoutProbe returns kc without the reachability probe when it is Helm's
// concrete client, and kc itself otherwise (a client of unknown kind may
// implement interfaces an embedding would hide).
func withoutProbe(kc kube.Interface) kube.Interface {
	if c, ok := kc.(*kube.Client); ok {
		return unprobedKube{Client: c}
	}
	return kc
}
