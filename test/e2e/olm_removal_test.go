//go:build e2e

// The removal of the ClusterExtension in TestInstalledByOLM, and the suite's
// cluster given back to the later tests.

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	"github.com/helmapp/helm-app-operator/internal/release"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (o *olmRun) waitGone(what string, get func(ctx context.Context) error) {
	o.t.Helper()
	o.eventually(what+" deleted", func(ctx context.Context) (bool, string) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("still there (%v)", err)
	})
}

// removalDeadline is how long the cluster may take, once the
// ClusterExtension is gone, to have nothing left in deletion (issue 41).
const removalDeadline = 60 * time.Second

// assertRemoval checks what is left of the operator's CRDs and resources
// once the ClusterExtension is gone (the behaviour docs/openshift.md
// describes): OLM v1 deletes the CRDs, the API server their resources, and
// the resources, which carry no finalizer (their releases are all the
// garbage collector's: every object in their namespace, no delete hook),
// go at once; the collector then deletes their objects and Helm's records.
// Within removalDeadline nothing is in deletion, and nothing of a release
// is left that its resource no longer owns. What is left is logged.
func (o *olmRun) assertRemoval(apps *env) {
	o.t.Helper()
	deadline := time.Now().Add(removalDeadline)
	var left []string
	for {
		left = o.leftAfterRemoval(apps)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	out, _ := suite.cp.Kubectl(context.Background(), "get", "crd", "nginxes.web.helmapp.io", "echoes.web.helmapp.io", "--ignore-not-found",
		"-o", "custom-columns=NAME:.metadata.name,DELETING:.metadata.deletionTimestamp")
	o.t.Logf("after the ClusterExtension's removal, CRDs:\n%s", out)
	out, _ = suite.cp.Kubectl(context.Background(), "get", "deployment,service,configmap,secret", "-n", apps.ns, "--ignore-not-found",
		"-o", "custom-columns=KIND:.kind,NAME:.metadata.name,DELETING:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers,OWNERS:.metadata.ownerReferences[*].name")
	o.t.Logf("and in %s:\n%s", apps.ns, out)
	if len(left) > 0 {
		o.t.Errorf("%s after the ClusterExtension's removal: %s", removalDeadline, strings.Join(left, "; "))
	}
}

// leftAfterRemoval names what the operator's removal must not leave: a CRD
// of ours, a resource of theirs, an object the operator labelled as a
// release's, or a record of Helm's, in apps' namespace.
func (o *olmRun) leftAfterRemoval(apps *env) []string {
	ctx := context.Background()
	var left []string
	for _, name := range []string{"nginxes.web.helmapp.io", "echoes.web.helmapp.io"} {
		c, err := suite.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			left = append(left, err.Error())
		case c.GetDeletionTimestamp() != nil:
			left = append(left, "CRD "+name+" in deletion (finalizers "+strings.Join(c.GetFinalizers(), ",")+")")
		default:
			left = append(left, "CRD "+name+" kept")
		}
	}
	for _, gvr := range []schema.GroupVersionResource{{Group: "web.helmapp.io", Version: "v1alpha1", Resource: "nginxes"},
		{Group: "web.helmapp.io", Version: "v1alpha1", Resource: "echoes"}} {
		list, err := suite.dyn.Resource(gvr).Namespace(apps.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue // the CRD is gone
		}
		for _, it := range list.Items {
			left = append(left, gvr.Resource+"/"+it.GetName()+" (finalizers "+strings.Join(it.GetFinalizers(), ",")+")")
		}
	}
	released := metav1.ListOptions{LabelSelector: dependents.Selector().String()}
	for _, gvr := range []schema.GroupVersionResource{{Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "services"}, {Version: "v1", Resource: "configmaps"}} {
		list, err := suite.dyn.Resource(gvr).Namespace(apps.ns).List(ctx, released)
		if err != nil {
			left = append(left, err.Error())
			continue
		}
		for _, it := range list.Items {
			left = append(left, gvr.Resource+"/"+it.GetName()+" of a release")
		}
	}
	records, err := suite.kube.CoreV1().Secrets(apps.ns).List(ctx, metav1.ListOptions{LabelSelector: release.RecordSelector.String()})
	if err != nil {
		return append(left, err.Error())
	}
	for _, s := range records.Items {
		left = append(left, "record "+s.Name)
	}
	return left
}

// restoreSuite gives the later tests the cluster TestMain made: the custom
// resources OLM's removal left waiting on the operator's finalizer are
// released, OLM's CRDs and namespaces deleted, our CRDs applied again.
func (o *olmRun) restoreSuite(crds string) {
	ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
	defer cancel()
	run := func(args ...string) {
		if out, err := suite.cp.Kubectl(ctx, args...); err != nil {
			o.t.Errorf("restoring the suite's cluster: %v\n%s", err, out)
		}
	}
	for _, kind := range []string{"nginxes.web.helmapp.io", "echoes.web.helmapp.io"} {
		list, err := suite.cp.Kubectl(ctx, "get", kind, "-A", "--ignore-not-found", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
		if err != nil {
			continue
		}
		for _, nn := range strings.Fields(list) {
			ns, name, _ := strings.Cut(nn, "/")
			run("patch", kind, name, "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
	}
	// OLM removes its own objects while it runs (an uninstall, for the
	// ClusterExtension); whatever it could not is released by hand.
	for _, kind := range []string{"clusterextensions.olm.operatorframework.io", "clustercatalogs.olm.operatorframework.io"} {
		if _, err := suite.cp.Kubectl(ctx, "delete", kind, "--all", "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
			list, _ := suite.cp.Kubectl(ctx, "get", kind, "-o", "name", "--ignore-not-found")
			for _, name := range strings.Fields(list) {
				run("patch", name, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
			}
		}
	}
	o.stop()
	run("delete", "crd", "nginxes.web.helmapp.io", "echoes.web.helmapp.io", "--ignore-not-found", "--wait=true")
	run("delete", "clusterrolebinding", "olm-e2e-metrics-reader", "--ignore-not-found")
	run("delete", "-f", filepath.Join(o.bins, "crds"), "--ignore-not-found", "--wait=true")
	run("delete", "namespace", olmInstallNamespace, olmSystemNamespace, "--ignore-not-found", "--wait=false")
	run("apply", "--server-side", "-f", crds)
	run("wait", "--for=condition=Established", "crd/nginxes.web.helmapp.io", "crd/echoes.web.helmapp.io", "--timeout="+deadline.String())
}
