//go:build e2e

// What a user sees of a release of an upstream chart (upstream_run_test.go)
// and what must be left of it after its resource is deleted: `helm list`,
// the objects of its manifest and hooks, and, for a failed test, the sweep
// of what it left outside its namespace.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// helmListed is a release as `helm list -o json` shows it.
type helmListed struct {
	Name, Namespace, Status, Chart, Revision string
}

// helmList is `helm list --all` of the namespace, as the admin.
func (r *upstreamRun) helmList() []helmListed {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := suite.cp.Helm(ctx, "list", "-n", r.ns, "--all", "-o", "json")
	if err != nil {
		r.t.Fatal(err)
	}
	var l []helmListed
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		r.t.Fatalf("helm list -o json: %v\n%s", err, out)
	}
	return l
}

// releaseObjects are the objects of the release's manifest and of its
// hooks, read with `helm get` while the release exists; namespaced ones
// without a namespace are in the release's.
func (r *upstreamRun) releaseObjects(release string) (manifest, hooks []*unstructured.Unstructured) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	read := func(what string) []*unstructured.Unstructured {
		out, err := suite.cp.Helm(ctx, "get", what, release, "-n", r.ns)
		if err != nil {
			r.t.Fatal(err)
		}
		objs, err := manifestObjects(out)
		if err != nil {
			r.t.Fatalf("helm get %s %s: %v", what, release, err)
		}
		return objs
	}
	return read("manifest"), read("hooks")
}

// objectRef names an object of a release, with where the API server keeps it.
type objectRef struct {
	obj        *unstructured.Unstructured
	mapping    *meta.RESTMapping
	namespaced bool
}

func (o objectRef) String() string {
	if o.namespaced {
		return fmt.Sprintf("%s %s/%s", o.obj.GetKind(), o.obj.GetNamespace(), o.obj.GetName())
	}
	return fmt.Sprintf("%s %s (cluster-scoped)", o.obj.GetKind(), o.obj.GetName())
}

// refs maps objs to their resources; a namespaced object without a
// namespace is in the release's namespace.
func (r *upstreamRun) refs(objs []*unstructured.Unstructured) []objectRef {
	r.t.Helper()
	e := &env{t: r.t, ns: r.ns}
	mapper, err := e.restMapper()
	if err != nil {
		r.t.Fatal(err)
	}
	var out []objectRef
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			r.t.Fatalf("%s %s: %v", gvk, u.GetName(), err)
		}
		ref := objectRef{obj: u, mapping: m, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
		if ref.namespaced && u.GetNamespace() == "" {
			u.SetNamespace(r.ns)
		}
		out = append(out, ref)
	}
	return out
}

// exists reports whether the object is in the cluster (and not being
// deleted).
func (o objectRef) exists(ctx context.Context) (bool, error) {
	res := suite.dyn.Resource(o.mapping.Resource)
	var (
		u   *unstructured.Unstructured
		err error
	)
	if o.namespaced {
		u, err = res.Namespace(o.obj.GetNamespace()).Get(ctx, o.obj.GetName(), metav1.GetOptions{})
	} else {
		u, err = res.Get(ctx, o.obj.GetName(), metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return u.GetDeletionTimestamp() == nil, nil
}

// eventually polls check until it returns true, failing after deadline.
func (r *upstreamRun) eventually(what string, check func(ctx context.Context) (bool, string)) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	last := ""
	for {
		ok, obs := check(ctx)
		if ok {
			return
		}
		last = obs
		select {
		case <-ctx.Done():
			r.t.Fatalf("waiting for %s: not within %s; last seen: %s\noperator log: %s", what, deadline, last, r.logPath)
		case <-time.After(pollInterval):
		}
	}
}

// deleteAndCheckGone deletes the resource name, waits until it is gone
// (the operator uninstalled its release and removed its finalizer), then
// checks that its release's records and every object of its manifest and
// hooks are gone, cluster-scoped ones included, and that the CRDs of the
// chart's crds/ stay (Helm's rule: an uninstall never deletes a CRD).
func (r *upstreamRun) deleteAndCheckGone(name string, manifest, hooks []*unstructured.Unstructured) {
	r.t.Helper()
	r.kubectl("delete", r.p.gvr.GroupResource().String()+"/"+name, "--timeout="+deadline.String())
	r.eventually("release "+name+"'s records deleted", func(ctx context.Context) (bool, string) {
		l, err := suite.kube.CoreV1().Secrets(r.ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, s := range l.Items {
			names = append(names, s.Name)
		}
		return len(names) == 0, "release Secrets: " + strings.Join(names, ", ")
	})
	if l := r.helmList(); len(l) != 0 {
		r.t.Errorf("helm list -n %s --all after the resource's deletion: %v, want nothing", r.ns, l)
	}
	all := append(r.refs(manifest), r.refs(hooks)...)
	r.eventually(fmt.Sprintf("the release's %d objects deleted", len(all)), func(ctx context.Context) (bool, string) {
		var left []string
		for _, o := range all {
			ok, err := o.exists(ctx)
			if err != nil {
				return false, err.Error()
			}
			if ok {
				left = append(left, o.String())
			}
		}
		return len(left) == 0, "still there: " + strings.Join(left, ", ")
	})
	cluster := slices.DeleteFunc(slices.Clone(all), func(o objectRef) bool { return o.namespaced })
	r.t.Logf("after the uninstall: the release's records and its %d objects (%d cluster-scoped) are gone", len(all), len(cluster))
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, c := range r.chartCRDs {
		crd, err := suite.dyn.Resource(crdGVR).Get(ctx, c, metav1.GetOptions{})
		switch {
		case err != nil:
			r.t.Errorf("the chart's CRD %s after the uninstall: %v; an uninstall keeps the CRDs of crds/ (Helm's rule)", c, err)
		case crd.GetDeletionTimestamp() != nil:
			r.t.Errorf("the chart's CRD %s is being deleted; an uninstall keeps the CRDs of crds/ (Helm's rule)", c)
		}
	}
	if len(r.chartCRDs) > 0 {
		r.t.Logf("the chart's %d CRDs of crds/ stay: an uninstall never deletes a CRD (the test deletes them)", len(r.chartCRDs))
	}
}

// leftoverKinds are the cluster-scoped kinds the upstream charts create.
var leftoverKinds = []schema.GroupVersionResource{
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"},
}

// sweep deletes, as the admin, the cluster-scoped objects of the
// namespace's releases that are left once the operator stopped (a test that
// failed before its uninstall, or an uninstall that failed): a webhook
// configuration left behind would refuse or slow the later tests' requests.
// Each one removed is logged; after a passing test there is none.
func (r *upstreamRun) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, gvr := range leftoverKinds {
		l, err := suite.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: "helmapp.io/managed-by=helm-app-operator"})
		if err != nil {
			r.t.Errorf("listing %s left by the test: %v", gvr.Resource, err)
			continue
		}
		for _, u := range l.Items {
			if u.GetAnnotations()["meta.helm.sh/release-namespace"] != r.ns {
				continue
			}
			err := suite.dyn.Resource(gvr).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			r.t.Logf("removed %s %s, left by release %s (%v)", gvr.Resource, u.GetName(), u.GetAnnotations()["meta.helm.sh/release-name"], err)
		}
	}
}
