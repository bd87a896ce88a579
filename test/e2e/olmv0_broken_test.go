//go:build e2e

// Two bundles broken on purpose, installed through OLM v0: what each
// failure looks like to the user.

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"

	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
	"github.com/helmapp/helm-app-operator/internal/tooling/ship"
)

// TestOLMv0BrokenPermissions ships a CSV whose permissions lack one rule on
// purpose (the Nginx watch's rule on configmaps, serviceaccounts and
// services; configmaps stay granted by the Echo watch's): OLM v0 installs it
// (Succeeded: it cannot know what the operator needs) and grants exactly
// what it says; the manager, running as OLM's ServiceAccount, refuses the
// Nginx before Helm runs with Ready=False PermissionDenied naming what is
// missing, and nothing is installed.
func TestOLMv0BrokenPermissions(t *testing.T) {
	o := newOLMv0(t)
	related := o.standIns()
	removed := false
	s := o.shipAltered("0.1.0", related, "without-rule", func(csv *v1alpha1.ClusterServiceVersion) {
		p := &csv.Spec.InstallStrategy.StrategySpec.Permissions[0]
		i := slices.IndexFunc(p.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, []string{""}) && slices.Contains(r.Resources, "services") && slices.Contains(r.Resources, "serviceaccounts")
		})
		if i >= 0 {
			t.Logf("removed from the CSV's permissions: %+v", p.Rules[i])
			p.Rules = slices.Delete(p.Rules, i, i+1)
			removed = true
		}
	})
	if !removed {
		t.Fatal("the CSV has no rule on services and serviceaccounts to remove")
	}
	o.start()
	o.publish(s.catalog)
	ns := "olmv0-broken-rbac-" + rand.String(5)
	o.installNS = ns
	o.subscribe(ns, []string{ns})
	o.approve(ns, csvName(s.version))
	csv := o.waitCSV(ns, csvName(s.version), "Succeeded")
	dep := o.operatorDeployment(ns, csv.Name, s.operator)
	sa := dep.Spec.Template.Spec.ServiceAccountName
	// OLM granted what the broken CSV says, nothing more.
	o.checkRBACv0(csv, ns, sa, []string{ns})

	apps := &env{t: t, ns: ns, dir: testDir(t)}
	t.Cleanup(func() { releaseNamespace(t, ns) })
	o.startManager(apps, dep, sa, "manager.log")
	apps.applyNginx("web", "  replicaCount: 1\n")
	n := apps.waitNginx("web", "nginx/web Ready=False PermissionDenied", func(n *nginx) bool {
		return n.is("Ready", metav1.ConditionFalse) && n.cond("Ready").Reason == "PermissionDenied"
	})
	ready := n.cond("Ready")
	t.Logf("nginx/web with the CSV's rule removed: Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
	for _, want := range []string{"create services", "create serviceaccounts"} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("Ready's message %q does not name %q", ready.Message, want)
		}
	}
	if out, err := suite.cp.Helm(context.Background(), "list", "-n", ns, "--all", "-q"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("helm list -n %s --all: %q %v, want nothing: the install was refused before Helm ran", ns, out, err)
	}
}

// TestOLMv0UnsupportedInstallMode ships a CSV that does not support
// AllNamespaces on purpose and subscribes to it from an OperatorGroup of
// all namespaces: OLM v0 installs nothing of it, the CSV Failed with reason
// UnsupportedOperatorGroup.
func TestOLMv0UnsupportedInstallMode(t *testing.T) {
	o := newOLMv0(t)
	related := o.standIns()
	s := o.shipAltered("0.1.0", related, "without-allnamespaces", func(csv *v1alpha1.ClusterServiceVersion) {
		for i := range csv.Spec.InstallModes {
			if csv.Spec.InstallModes[i].Type == v1alpha1.InstallModeTypeAllNamespaces {
				csv.Spec.InstallModes[i].Supported = false
			}
		}
	})
	o.start()
	o.publish(s.catalog)
	ns := "olmv0-broken-mode-" + rand.String(5)
	o.installNS = ns
	o.subscribe(ns, nil)
	o.approve(ns, csvName(s.version))
	csv := o.waitCSV(ns, csvName(s.version), "Failed")
	t.Logf("csv %s in an OperatorGroup of all namespaces: phase %s, reason %s: %s", csv.Name, csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	if csv.Status.Reason != v1alpha1.CSVReasonUnsupportedOperatorGroup {
		t.Errorf("the CSV's reason %s, want %s", csv.Status.Reason, v1alpha1.CSVReasonUnsupportedOperatorGroup)
	}
	if list, err := suite.kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("Deployments in %s: %v %v, want none: OLM must not run an operator in a mode it does not support", ns, list, err)
	}
	t.Cleanup(func() { releaseNamespace(t, ns) })
}

// shipAltered ships version like ship, then a bundle of the same content
// with edit applied to its CSV (pushed as bundle image
// helm-app-operator-bundle:v<version>-<tag>) and the catalog of that bundle
// alone, which is what it returns.
func (o *olmV0) shipAltered(version string, related map[string]string, tag string, edit func(*v1alpha1.ClusterServiceVersion)) shipped {
	o.t.Helper()
	s := o.ship(version, "", related)
	src := filepath.Join(suite.root, "bin", "ship", "bundle", "bundle")
	dir := filepath.Join(o.dir, "bundle-"+tag)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		o.t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	if len(matches) != 1 {
		o.t.Fatalf("bundle %s: %d CSV files", src, len(matches))
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		o.t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(b, csv); err != nil {
		o.t.Fatal(err)
	}
	edit(csv)
	if b, err = yaml.Marshal(csv); err != nil {
		o.t.Fatal(err)
	}
	if err := os.WriteFile(matches[0], b, 0o644); err != nil {
		o.t.Fatal(err)
	}
	ctx := context.Background()
	im, err := ship.BuildBundleImage(ctx, suite.root, dir)
	if err != nil {
		o.t.Fatal(err)
	}
	d, err := img.Push(ctx, fmt.Sprintf("%s/helm-app-operator-bundle:v%s-%s", o.reg.Host, version, tag), im)
	if err != nil {
		o.t.Fatal(err)
	}
	s.bundle = d.String()
	out := o.make("catalog-push", "VERSION="+version, "PLATFORMS=linux/"+goarch(), "BUNDLE_IMG="+s.bundle,
		"CATALOG_IMG="+o.reg.Host+"/helm-app-operator-catalog:v"+version+"-"+tag)
	m := regexp.MustCompile(`(?m)^catalog image: (\S+@sha256:[0-9a-f]{64})$`).FindStringSubmatch(out)
	if m == nil {
		o.t.Fatalf("make catalog-push printed no catalog digest:\n%s", out)
	}
	s.catalog = m[1]
	o.t.Logf("shipped %s %s: bundle %s, catalog %s", version, tag, s.bundle, s.catalog)
	return s
}
