//go:build e2e

// The removal of the ClusterExtension in TestInstalledByOLM, and the suite's
// cluster given back to the later tests.

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// reportRemoval logs what is left of the operator's CRDs and resources once
// the ClusterExtension is gone (the behaviour docs/openshift.md describes)
// and checks it: the CRDs are deleted, so their resources are being deleted
// and wait on the operator's finalizer.
func (o *olmRun) reportRemoval(apps *env) {
	o.t.Helper()
	o.eventually("the CRDs deleted or terminating", func(ctx context.Context) (bool, string) {
		var seen []string
		done := true
		for _, name := range []string{"nginxes.web.helmapp.io", "echoes.web.helmapp.io"} {
			c, err := suite.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				seen = append(seen, name+" gone")
			case err != nil:
				return false, err.Error()
			case c.GetDeletionTimestamp() != nil:
				seen = append(seen, name+" terminating")
			default:
				seen = append(seen, name+" kept")
				done = false
			}
		}
		return done, strings.Join(seen, ", ")
	})
	out, _ := suite.cp.Kubectl(context.Background(), "get", "crd", "nginxes.web.helmapp.io", "echoes.web.helmapp.io", "--ignore-not-found",
		"-o", "custom-columns=NAME:.metadata.name,DELETING:.metadata.deletionTimestamp")
	o.t.Logf("after the ClusterExtension's removal, CRDs:\n%s", out)
	out, _ = suite.cp.Kubectl(context.Background(), "get", "nginx,echo,deployment", "-n", apps.ns, "--ignore-not-found",
		"-o", "custom-columns=KIND:.kind,NAME:.metadata.name,DELETING:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers")
	o.t.Logf("and in %s:\n%s", apps.ns, out)
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
