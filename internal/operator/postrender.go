package operator

import (
	"bytes"
	"context"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/postrender"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/release"
)

// releasePostRenderer is the one post-renderer of the operator's installs and
// upgrades. Each object of the rendered manifest gets the labels of
// dependents.Labeler (so that the labelled-object cache sees it) and is made
// the owner's: a controller reference where Kubernetes allows one (the
// owner cluster-scoped, or both in one namespace) and the object does not
// ask to be kept (helm.sh/resource-policy: keep), operator-lib's owner
// annotations otherwise. That is what dependents.Labeler and then
// helm-operator-plugins' default post-renderer did in turn, each parsing
// every manifest and encoding it to YAML again; done in one pass, the
// manifest is parsed and encoded once (docs/performance.md), and it is byte
// for byte what the two wrote (TestPostRendererWritesWhatTheTwoWrote), so
// that no release is upgraded for the change, but one: an integer beyond
// 2^53, which the labeller (decoding numbers as float64) rounded, is now
// written as the chart gives it.
//
// Before any of that, every object must be in the release's scope
// (release.Scope: the release's namespace, and what the watch's scope
// allows beyond it): a manifest with one object outside it is refused
// whole (release.StraysError), and Helm stops before it stores a revision
// or applies anything. The objects are judged as Helm will apply them —
// Helm's own build of the manifest gives each its namespace and scope —
// so that no reading of the YAML can differ from what is applied.
type releasePostRenderer struct {
	rm     meta.RESTMapper
	kc     kube.Interface
	owner  client.Object
	labels dependents.Labeler
	scope  release.Scope
}

var _ postrender.PostRenderer = releasePostRenderer{}

// Run builds the manifest's objects as Helm does (the release namespace set
// on namespaced objects that name none, lists flattened), labels and owns
// each, and writes them back as YAML documents.
func (p releasePostRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	manifest := in.Bytes()
	infos, err := p.kc.Build(bytes.NewReader(manifest), false)
	if err != nil {
		return nil, err
	}
	if err := p.inScope(infos, manifest); err != nil {
		return nil, err
	}
	out := &bytes.Buffer{}
	for _, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(info.Object)
			if err != nil {
				return nil, err
			}
			u = &unstructured.Unstructured{Object: m}
		}
		p.labels.Label(u)
		if err := p.own(u); err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out, nil
}

// inScope refuses infos, built from manifest, when one of them lies outside
// the release's scope, naming each such object and its template.
func (p releasePostRenderer) inScope(infos kube.ResourceList, manifest []byte) error {
	objs := make([]release.ScopedObject, 0, len(infos))
	for _, info := range infos {
		o := release.ScopedObject{ObjectRef: readiness.ObjectRef{Namespace: info.Namespace, Name: info.Name}}
		if m := info.Mapping; m != nil {
			o.APIVersion, o.Kind = m.GroupVersionKind.GroupVersion().String(), m.GroupVersionKind.Kind
			o.ClusterScoped = m.Scope.Name() == meta.RESTScopeNameRoot
		} else {
			o.APIVersion, o.Kind = info.Object.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
		}
		objs = append(objs, o)
	}
	strays := p.scope.Strays(objs, p.owner.GetName(), p.owner.GetNamespace())
	if len(strays) == 0 {
		return nil
	}
	// Only now is the manifest read for the templates the strays came from.
	if sourced, err := release.ManifestObjects(string(manifest), p.owner.GetNamespace(), p.rm); err == nil {
		for i, s := range strays {
			for _, o := range sourced {
				if o.Kind == s.Kind && o.Name == s.Name && (o.Namespace == s.Namespace || o.ClusterScoped || s.ClusterScoped) {
					strays[i].Source = o.Source
					break
				}
			}
		}
	}
	return &release.StraysError{Strays: strays, Namespace: p.owner.GetNamespace()}
}

// own makes u the owner's (see releasePostRenderer).
func (p releasePostRenderer) own(u *unstructured.Unstructured) error {
	byReference, err := p.canReference(u)
	if err != nil {
		return err
	}
	if !byReference || manifestutil.HasResourcePolicyKeep(u.GetAnnotations()) {
		return sdkhandler.SetOwnerAnnotations(p.owner, u)
	}
	ref := metav1.NewControllerRef(p.owner, p.owner.GetObjectKind().GroupVersionKind())
	u.SetOwnerReferences(append(u.GetOwnerReferences(), *ref))
	return nil
}

// canReference says whether u may carry an owner reference to the owner:
// anything may point at a cluster-scoped owner; a namespaced owner, only
// objects of its own namespace.
func (p releasePostRenderer) canReference(u *unstructured.Unstructured) (bool, error) {
	ownerGVK := p.owner.GetObjectKind().GroupVersionKind()
	ownerMapping, err := p.rm.RESTMapping(ownerGVK.GroupKind(), ownerGVK.Version)
	if err != nil {
		return false, err
	}
	gvk := u.GroupVersionKind()
	mapping, err := p.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	switch {
	case ownerMapping.Scope.Name() == meta.RESTScopeNameRoot:
		return true, nil
	case mapping.Scope.Name() == meta.RESTScopeNameRoot:
		return false, nil
	}
	return p.owner.GetNamespace() == u.GetNamespace(), nil
}

// onePass gives each resource's Helm client releasePostRenderer as its only
// post-renderer. helm-operator-plugins' ActionClientFor always chains its
// default owner post-renderer after those it is given; provider, handed to
// it, builds ours from the REST mapper, kube client and owner it is called
// with and keeps it for the owner until getter's ActionClientFor (which
// called it) takes it, and the client getter returns sets it on every
// install and upgrade, in place of the chain.
type onePass struct {
	built sync.Map // client.Object (the owner) → releasePostRenderer
}

func (o *onePass) provider(labelsOf func(map[string]string) map[string]string, scopes map[schema.GroupVersionKind]release.Scope) helmclient.PostRendererProvider {
	return func(rm meta.RESTMapper, kc kube.Interface, owner client.Object) postrender.PostRenderer {
		p := releasePostRenderer{rm: rm, kc: kc, owner: owner, labels: dependents.Labeler{Labels: labelsOf(owner.GetLabels())},
			scope: scopes[owner.GetObjectKind().GroupVersionKind()]}
		o.built.Store(owner, p)
		return p
	}
}

func (o *onePass) getter(inner helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return onePassGetter{ActionClientGetter: inner, o: o}
}

type onePassGetter struct {
	helmclient.ActionClientGetter
	o *onePass
}

func (g onePassGetter) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	ac, err := g.ActionClientGetter.ActionClientFor(ctx, obj)
	p, built := g.o.built.LoadAndDelete(obj)
	if err != nil {
		return nil, err
	}
	if !built {
		return ac, nil
	}
	return onePassClient{ActionInterface: ac, p: p.(releasePostRenderer)}, nil
}

type onePassClient struct {
	helmclient.ActionInterface
	p releasePostRenderer
}

func (c onePassClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*helmrelease.Release, error) {
	return c.ActionInterface.Install(name, namespace, chrt, vals, append([]helmclient.InstallOption{helmclient.WithInstallPostRenderer(c.p)}, opts...)...)
}

func (c onePassClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*helmrelease.Release, error) {
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, append([]helmclient.UpgradeOption{helmclient.WithUpgradePostRenderer(c.p)}, opts...)...)
}
