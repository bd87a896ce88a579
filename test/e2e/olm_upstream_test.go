//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// TestUpstreamChartInstalledByOLM ships the operator an author makes of an
// upstream chart (sealed-secrets, with the command and CRDS=bundle, in a
// scratch copy of this project): `make bundle` validates with 0 errors and 0 warnings, the
// CSV supports only the install mode the chart allows, and OLM v1 installs
// the bundle from its catalog image; the manager, running as the
// ServiceAccount OLM created with what OLM granted, makes the chart's sample
// Ready, and deleting it removes its release and objects.
func TestUpstreamChartInstalledByOLM(t *testing.T) {
	p := newProject(t)
	// The chart's crds/ ship in the bundle (OLM installs them): an operator
	// that may create CRDs is what the operatorframework validators warn of.
	p.addChart(sealedSecretsChart.dir(t), "SealedSecretsController", "security", "--crds", "bundle")
	o := &olmRun{t: t, dir: testDir(t), root: p.root, manager: p.build()}

	// The bundle an author commits, validated as operator-sdk's
	// `bundle validate --select-optional suite=operatorframework` does.
	out := o.make("bundle")
	verdict := regexp.MustCompile(`(?m)^bundle: \d+ errors, \d+ warnings .*$`).FindString(out)
	if !strings.HasPrefix(verdict, "bundle: 0 errors, 0 warnings ") {
		t.Fatalf("make bundle did not validate with 0 errors and 0 warnings:\n%s", out)
	}
	t.Log(verdict)

	o.bins = olmBins(t)
	reg, err := img.ServeRegistry("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	o.reg = reg
	t.Cleanup(func() { _ = reg.Close() })
	related := o.pushStandIns(projectRelatedImages(t, p.root))
	a := o.ship("0.1.0", "", related)
	csv, err := bundle.ReadBundleCSV(filepath.Join(p.root, "bin", "ship", "bundle", "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	// sealed-secrets creates a ClusterRole of a fixed name
	// (secrets-unsealer): two installs watching different namespaces would
	// own the same object, so only AllNamespaces is supported.
	for _, m := range csv.Spec.InstallModes {
		if want := m.Type == v1alpha1.InstallModeTypeAllNamespaces; m.Supported != want {
			t.Errorf("the CSV's install mode %s supported: %v, want %v (the chart creates cluster-scoped objects of fixed names)", m.Type, m.Supported, want)
		}
	}

	// OLM installs the bundle's CRDs, our two among them: the suite's go
	// for the test and come back after it (restoreSuite, which also stops
	// OLM); the project's own kind and the chart's CRDs go after it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
		defer cancel()
		// A resource left by a failed test waits on the finalizer of a
		// manager that is gone.
		list, _ := suite.cp.Kubectl(ctx, "get", p.gvr.GroupResource().String(), "-A", "--ignore-not-found", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`)
		for _, nn := range strings.Fields(list) {
			ns, name, _ := strings.Cut(nn, "/")
			_, _ = suite.cp.Kubectl(ctx, "patch", p.gvr.GroupResource().String(), name, "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
		args := []string{"delete", "crd", p.gvr.GroupResource().String(), "--ignore-not-found", "--wait=true"}
		if out, err := suite.cp.Kubectl(ctx, append(args, p.chartCRDs()...)...); err != nil {
			t.Errorf("deleting the project's and the chart's CRDs: %v\n%s", err, out)
		}
	})
	crds := filepath.Join(suite.root, "config", "crd", "bases")
	o.kubectl("delete", "-f", crds, "--wait=true")
	t.Cleanup(func() { o.restoreSuite(crds) })
	o.start()

	o.kubectl("create", "namespace", olmInstallNamespace)
	o.applyYAML("clustercatalog", catalogManifest(a.catalog))
	o.waitCondition(clusterCatalogGVR, olmCatalogName, "Serving", "True")
	o.applyYAML("clusterextension", extensionManifest())
	t.Logf("ClusterExtension installed %s", o.waitInstalled("0.1.0"))
	// OLM installed the kind's CRD and the chart's.
	established := []string{"wait", "--for=condition=Established", "--timeout=" + deadline.String(), "crd/" + p.gvr.GroupResource().String()}
	for _, c := range p.chartCRDs() {
		established = append(established, "crd/"+c)
	}
	o.kubectl(established...)
	dep := o.operatorDeployment(a.operator)
	sa := dep.Spec.Template.Spec.ServiceAccountName
	o.checkRBAC(csv, sa)

	// The manager of the project, as the ServiceAccount OLM created.
	apps := &env{t: t, ns: "olm-up-" + rand.String(5), dir: testDir(t)}
	o.kubectl("create", "namespace", apps.ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		_, _ = suite.cp.Kubectl(ctx, "delete", "namespace", apps.ns, "--ignore-not-found", "--wait=false")
	})
	m := o.startManager(apps, dep, sa, "manager.log")
	r := &upstreamRun{t: t, p: p, ns: apps.ns, dir: apps.dir, op: m, logPath: m.logPath,
		user: "system:serviceaccount:" + olmInstallNamespace + ":" + sa, chartCRDs: p.chartCRDs()}
	// Before the manager stops: what a failed test left is uninstalled.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if m.Exited() == nil {
			_, _ = suite.cp.Kubectl(ctx, "delete", p.gvr.GroupResource().String(), "--all", "-n", apps.ns, "--timeout=90s")
		}
		r.sweep()
	})
	name := p.sampleName()
	r.kubectl("apply", "-f", p.sample)
	n := r.wait(name, "the sample "+name+" settled", settled)
	if !n.is("Ready", metav1.ConditionTrue) {
		t.Fatalf("the sample settled not Ready:\n%s\nmanager log: %s", n, m.logPath)
	}
	ready := n.cond("Ready")
	t.Logf("%s/%s: Ready=%s %s: %s", p.kind, name, ready.Status, ready.Reason, ready.Message)
	if l := r.helmList(); len(l) != 1 || l[0].Name != name || l[0].Status != "deployed" {
		t.Fatalf("helm list -n %s --all: %+v, want release %s deployed", r.ns, l, name)
	}
	manifest, hooks := r.releaseObjects(name)
	checkPinnedImages(t, manifest, related)
	r.deleteAndCheckGone(name, manifest, hooks)
	if err := m.stop(); err != nil {
		t.Errorf("%v (log %s)", err, m.logPath)
	}
	r.checkDenials()

	o.kubectl("delete", "clusterextension/"+olmExtensionName, "--wait=false")
	o.waitGone("the operator's Deployment", func(ctx context.Context) error {
		_, err := suite.kube.AppsV1().Deployments(olmInstallNamespace).Get(ctx, dep.Name, metav1.GetOptions{})
		return err
	})
}

// projectRelatedImages are the operand images the project's manager names
// (its RELATED_IMAGE_* variables in config/manager), each given a
// stand-in repository of the loopback registry.
func projectRelatedImages(t *testing.T, root string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repos := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- name: (RELATED_IMAGE_[A-Z0-9_]+)\s*$`).FindAllStringSubmatch(string(b), -1) {
		repos[m[1]] = "stand-in/" + strings.ToLower(strings.TrimPrefix(m[1], "RELATED_IMAGE_")) + ":1.0.0"
	}
	return repos
}

// checkPinnedImages: every container of the release's workloads runs an
// operand image the bundle pinned by digest (a RELATED_IMAGE_* variable of
// OLM's Deployment, reaching the chart through watches.yaml's
// overrideValues), so that a mirror serves it.
func checkPinnedImages(t *testing.T, manifest []*unstructured.Unstructured, related map[string]string) {
	t.Helper()
	pinned := map[string]bool{}
	for _, im := range related {
		pinned[im] = true
	}
	n := 0
	for _, u := range manifest {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		inits, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "initContainers")
		for _, c := range append(inits, containers...) {
			m, _ := c.(map[string]any)
			image, _ := m["image"].(string)
			n++
			if !pinned[image] {
				t.Errorf("%s %s, container %v runs %s, not an image the bundle pinned (%v)", u.GetKind(), u.GetName(), m["name"], image, related)
			}
		}
	}
	if n == 0 {
		t.Error("the release runs no container: nothing to check the pinned images on")
	}
	t.Logf("the release's %d containers run images the bundle pinned by digest", n)
}
