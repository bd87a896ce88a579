//go:build e2e

// The OLM objects of TestInstalledByOLM: the ClusterCatalog and the
// ClusterExtension, and waiting on what OLM makes of them.

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func catalogManifest(ref string) string {
	return fmt.Sprintf(`apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: %s
  labels:
    %s: %s
spec:
  source:
    type: Image
    image:
      ref: %s
`, olmCatalogName, olmCatalogNameLabel, olmCatalogName, ref)
}

func extensionManifest() string {
	return fmt.Sprintf(`apiVersion: olm.operatorframework.io/v1
kind: ClusterExtension
metadata:
  name: %s
spec:
  namespace: %s
  source:
    sourceType: Catalog
    catalog:
      packageName: %s
      channels: [candidate]
`, olmExtensionName, olmInstallNamespace, olmPackage)
}

func (o *olmRun) applyYAML(name, manifest string) {
	o.t.Helper()
	p := filepath.Join(o.dir, name+".yaml")
	if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
		o.t.Fatal(err)
	}
	o.kubectl("apply", "-f", p)
}

func (o *olmRun) applyEcho(e *env, name, message string) {
	o.t.Helper()
	e.apply("echo-"+name, fmt.Sprintf("apiVersion: web.helmapp.io/v1alpha1\nkind: Echo\nmetadata:\n  name: %s\nspec:\n  message: %s\n", name, message))
}

// eventually polls check until it returns true, failing after olmDeadline
// with the last observation, or at once if an OLM process exited.
func (o *olmRun) eventually(what string, check func(ctx context.Context) (bool, string)) {
	o.t.Helper()
	olmEventually(o.t, o.dir, o.exited, time.Second, what, check)
}

// olmEventually is the polling of both OLM harnesses: check every interval
// until it returns true, failing after olmDeadline with the last
// observation and where OLM's logs are, or at once when exited reports an
// OLM process gone.
func olmEventually(t *testing.T, dir string, exited func() error, interval time.Duration, what string, check func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
	defer cancel()
	last := ""
	for {
		if err := exited(); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		ok, obs := check(ctx)
		if ok {
			return
		}
		last = obs
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: not within %s; last seen: %s\nOLM logs in %s", what, olmDeadline, last, dir)
		case <-time.After(interval):
		}
	}
}

// conditions of an OLM object, one per line.
func conditionsOf(u *unstructured.Unstructured) (map[string]string, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	got := map[string]string{}
	var b strings.Builder
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		got[typ] = st
		fmt.Fprintf(&b, "\n  %s=%s %v: %v", typ, st, m["reason"], m["message"])
	}
	return got, b.String()
}

func (o *olmRun) waitCondition(gvr schema.GroupVersionResource, name, typ, status string) {
	o.t.Helper()
	o.eventually(fmt.Sprintf("%s/%s %s=%s", gvr.Resource, name, typ, status), func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got, s := conditionsOf(u)
		return got[typ] == status, s
	})
}

// waitInstalled waits until the ClusterExtension has Installed=True with the
// bundle of version installed, and returns that bundle's name.
func (o *olmRun) waitInstalled(version string) string {
	o.t.Helper()
	var installed string
	o.eventually("clusterextension/"+olmExtensionName+" Installed=True at "+version, func(ctx context.Context) (bool, string) {
		u, err := suite.dyn.Resource(clusterExtensionGVR).Get(ctx, olmExtensionName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got, s := conditionsOf(u)
		name, _, _ := unstructured.NestedString(u.Object, "status", "install", "bundle", "name")
		v, _, _ := unstructured.NestedString(u.Object, "status", "install", "bundle", "version")
		installed = name + " " + v
		return got["Installed"] == "True" && v == version, "installed " + installed + s
	})
	return installed
}

// operatorDeployment is the operator's Deployment OLM created, checked to
// run the operator image by the digest the bundle pinned.
func (o *olmRun) operatorDeployment(operatorDigest string) *appsv1.Deployment {
	o.t.Helper()
	var dep *appsv1.Deployment
	o.eventually("the operator's Deployment running "+operatorDigest, func(ctx context.Context) (bool, string) {
		list, err := suite.kube.AppsV1().Deployments(olmInstallNamespace).List(ctx, metav1.ListOptions{LabelSelector: olmOwnerNameLabel + "=" + olmExtensionName})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 1 {
			return false, fmt.Sprintf("%d Deployments owned by the ClusterExtension", len(list.Items))
		}
		dep = &list.Items[0]
		var images []string
		for _, c := range dep.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		return slices.Contains(images, operatorDigest), "images " + strings.Join(images, ", ")
	})
	return dep
}

// changeOneDeleteOne is what both OLMs' tests do with the resources of an
// operator OLM installed: nginx/web (Ready as web) scaled to 2, Ready at its
// new generation with 2 available replicas; echo/bye deleted, its release
// gone.
func changeOneDeleteOne(apps *env, web *nginx) {
	apps.t.Helper()
	apps.kubectl("patch", "nginx/web", "--type=merge", "-p", `{"spec":{"replicaCount":2}}`)
	apps.waitNginx("web", "nginx/web Ready at its new generation", func(n *nginx) bool {
		return n.Metadata.Generation > web.Metadata.Generation && n.is("Ready", metav1.ConditionTrue)
	})
	apps.eventually("web", "Deployment web with 2 available replicas", func(ctx context.Context) (bool, string) {
		d, err := apps.deployment(ctx, "web")
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 2 && rolledOut(d), fmt.Sprintf("%d available", d.Status.AvailableReplicas)
	})
	apps.kubectl("delete", "echo/bye", "--timeout="+deadline.String())
	apps.eventually("bye", "echo/bye's release uninstalled", func(ctx context.Context) (bool, string) {
		out, err := suite.cp.Helm(ctx, "status", "bye", "-n", apps.ns)
		return err != nil && strings.Contains(out+err.Error(), "not found"), out
	})
}
