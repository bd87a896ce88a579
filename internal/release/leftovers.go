package release

import (
	"context"
	"fmt"
	"strings"

	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"helm.sh/helm/v3/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A release's objects outside its namespace — the cluster-scoped ones, and
// the namespaced ones of other namespaces, as the watch's scope allows —
// are deleted by Helm's uninstall, which reads them from the release's
// latest record. When the records are gone before the resource's deletion
// is handled, nothing names them: the namespace's deletion is the usual
// cause (the namespace controller deletes the release Secrets at once,
// while the resource waits for its finalizer), or someone deleting the
// records by hand. The namespace's deletion takes the namespaced objects
// with it, and the resource's owner references the rest of its namespace;
// nothing takes the others. A real chart's ClusterRoles and
// ClusterRoleBindings would stay, and its webhook configurations would
// keep sending the cluster's requests to a Service that is gone (issue 39:
// gatekeeper's check-ignore-label webhook, failurePolicy Fail, then refuses
// every namespace's creation).
//
// What still names them is what the operator wrote on each object of the
// release it rendered: the managed-by label (internal/dependents) and, on
// an object that cannot carry an owner reference to the resource,
// operator-lib's owner annotations (the resource's namespace/name and
// kind). Leftovers finds those objects among the kinds and names the
// watch's scope allows, the only ones a release could have created there.

// Leftovers deletes what a release whose records are gone left outside its
// namespace.
type Leftovers struct {
	// Reader lists the objects' metadata, live (an uncached reader: no
	// informer is started for a kind listed once).
	Reader client.Reader
	// Mapper resolves the scope's kinds to their resources.
	Mapper meta.RESTMapper
	// Objects deletes them, as the release's identity.
	Objects client.Client
	// Selector selects the objects the operator labelled
	// (dependents.Selector); nil lists every object of a kind.
	Selector labels.Selector
}

// Sweep deletes the objects outside namespace ns that the release name of
// the resource owner (of kind owner, in ns) left: those of a kind and a
// name scope allows, labelled by Selector, whose owner annotations name the
// resource. An object that asks to be kept (helm.sh/resource-policy: keep)
// stays, as Helm's uninstall would leave it. It returns what it deleted,
// named as "ClusterRole x" or "ConfigMap other/x". A kind the API server no
// longer serves has nothing left to delete.
func (l Leftovers) Sweep(ctx context.Context, scope Scope, owner schema.GroupKind, ns, name string) ([]string, error) {
	var deleted []string
	sweep := func(r ScopeRule, in string) error {
		gone, err := l.sweepRule(ctx, r, in, owner, ns, name)
		deleted = append(deleted, gone...)
		return err
	}
	for _, r := range scope.ClusterScoped {
		if err := sweep(r, ""); err != nil {
			return deleted, err
		}
	}
	for _, r := range scope.Namespaced {
		for _, in := range r.Namespaces {
			if in == ns {
				continue
			}
			if err := sweep(r, in); err != nil {
				return deleted, err
			}
		}
	}
	return deleted, nil
}

// sweepRule deletes the release's leftovers of rule r's kind in namespace
// in ("" for a cluster-scoped kind).
func (l Leftovers) sweepRule(ctx context.Context, r ScopeRule, in string, owner schema.GroupKind, ns, name string) ([]string, error) {
	mapping, err := l.Mapper.RESTMapping(schema.GroupKind{Group: r.Group, Kind: r.Kind})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolving kind %s: %w", schema.GroupKind{Group: r.Group, Kind: r.Kind}, err)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
	opts := []client.ListOption{}
	if in != "" {
		opts = append(opts, client.InNamespace(in))
	}
	if l.Selector != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: l.Selector})
	}
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s: %w", mapping.Resource.Resource, err)
	}
	var deleted []string
	for i := range list.Items {
		o := &list.Items[i]
		if !leftOver(o, r, owner, ns, name) {
			continue
		}
		o.SetGroupVersionKind(mapping.GroupVersionKind)
		what := mapping.GroupVersionKind.Kind + " " + o.GetName()
		if in != "" {
			what = mapping.GroupVersionKind.Kind + " " + in + "/" + o.GetName()
		}
		// Background: the object goes at once, its own dependents after.
		err := l.Objects.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &o.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone already, or replaced by another object of that name
		}
		if err != nil {
			return deleted, fmt.Errorf("deleting %s: %w", what, err)
		}
		deleted = append(deleted, what)
	}
	return deleted, nil
}

// leftOver tells whether o, found under rule r, is an object of release
// name of the resource ns/name of kind owner.
func leftOver(o *metav1.PartialObjectMetadata, r ScopeRule, owner schema.GroupKind, ns, name string) bool {
	a := o.GetAnnotations()
	if a[sdkhandler.NamespacedNameAnnotation] != ns+"/"+name || a[sdkhandler.TypeAnnotation] != owner.String() {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(a[kube.ResourcePolicyAnno]), kube.KeepPolicy) {
		return false
	}
	for _, p := range r.Names {
		if MatchName(p, o.GetName(), name, ns) {
			return true
		}
	}
	return false
}
