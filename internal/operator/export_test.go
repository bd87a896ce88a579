package operator

import (
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/postrender"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/release"
)

// For the external tests of this package.
const CapabilitiesTTL = capabilitiesTTL

func NewSharedCapabilities(inner helmclient.ActionConfigGetter, now func() time.Time) helmclient.ActionConfigGetter {
	return newSharedCapabilities(inner, now, nil, nil, logr.Discard())
}

// NewSharedCapabilitiesLogging is NewSharedCapabilities logging to log.
func NewSharedCapabilitiesLogging(inner helmclient.ActionConfigGetter, now func() time.Time, log logr.Logger) helmclient.ActionConfigGetter {
	return newSharedCapabilities(inner, now, nil, nil, log)
}

// KubeFactory is the factory of Helm's kube client kc, as the operator
// configures it (nil when kc is of another kind).
func KubeFactory(kc kube.Interface) kube.Factory {
	switch c := kc.(type) {
	case unprobedKube:
		return c.Factory
	case *kube.Client:
		return c.Factory
	}
	return nil
}

// WithCrashPoint is the test-only crash point's installation (crashpoint.go).
var WithCrashPoint = withCrashPoint

// WithViewFault is the test-only view perturbation's installation (viewfault.go).
var WithViewFault = withViewFault

// NewViewFault is the perturbation of spec (ViewEnv's syntax) logging to log:
// wrap installs it on a config, perturbed counts the events it has held
// back or dropped.
func NewViewFault(spec string, log io.Writer) (wrap func(*rest.Config) *rest.Config, perturbed func() int, err error) {
	v, err := parseViewFault(spec)
	if err != nil {
		return nil, nil, err
	}
	v.log = log
	return func(c *rest.Config) *rest.Config {
		w := rest.CopyConfig(c)
		w.Wrap(func(rt http.RoundTripper) http.RoundTripper { return viewTransport{rt: rt, v: v} })
		return w
	}, v.count, nil
}

// NewReleasePostRenderer is the operator's post-renderer for owner
// (postrender.go), with labels as the shard's, for a watch whose scope
// allows what the tests' manifests hold beyond the owner's namespace (a
// ClusterRole, ConfigMaps in namespace "other": edgeManifest), and the
// cluster-scoped kinds the project's charts create (test/e2e's clusterwide,
// and the real charts' of issue 39).
func NewReleasePostRenderer(rm meta.RESTMapper, kc kube.Interface, owner client.Object, labels map[string]string) postrender.PostRenderer {
	var cluster []release.ScopeRule
	for _, gk := range [][2]string{{"rbac.authorization.k8s.io", "ClusterRole"}, {"rbac.authorization.k8s.io", "ClusterRoleBinding"},
		{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"}, {"admissionregistration.k8s.io", "MutatingWebhookConfiguration"},
		{"storage.k8s.io", "CSIDriver"}, {"scheduling.k8s.io", "PriorityClass"}, {"apiextensions.k8s.io", "CustomResourceDefinition"},
		{"apiregistration.k8s.io", "APIService"}} {
		cluster = append(cluster, release.ScopeRule{Group: gk[0], Kind: gk[1], Names: []string{"*"}})
	}
	return NewScopedPostRenderer(rm, kc, owner, labels, release.Scope{
		ClusterScoped: cluster,
		Namespaced:    []release.ScopeRule{{Kind: "ConfigMap", Namespaces: []string{"other"}, Names: []string{"*"}}},
	})
}

// NewScopedPostRenderer is the operator's post-renderer for owner with the
// watch's scope.
func NewScopedPostRenderer(rm meta.RESTMapper, kc kube.Interface, owner client.Object, labels map[string]string, scope release.Scope) postrender.PostRenderer {
	return releasePostRenderer{rm: rm, kc: kc, owner: owner, labels: dependents.Labeler{Labels: labels}, scope: scope}
}
