//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// TestInstalledByOLM installs the operator the way an OLM user does, through
// a real OLM v1 (catalogd and operator-controller, out of the cluster: see
// olm_cluster_test.go) from our catalog image, runs it with what OLM granted,
// upgrades it through the channel and removes it.
//
// OLM_DEMO=1 (make olm-demo) stops after the upgrade with everything running
// and prints how to look at it, until Ctrl-C.
func TestInstalledByOLM(t *testing.T) {
	o := &olmRun{t: t, dir: testDir(t)}
	o.bins = olmBins(t)
	reg, err := img.ServeRegistry("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	o.reg = reg
	t.Cleanup(func() { _ = reg.Close() })

	// Both versions are pushed now; B is published later by pointing the
	// ClusterCatalog at its catalog image.
	related := o.standIns()
	a := o.ship("0.1.0", "", related)
	b := o.ship("0.1.1", "helm-app-operator.v0.1.0", related, a.bundle)

	// The suite's cluster has our CRDs (TestMain applied them): OLM installs
	// them itself, so they go for this test and come back after it.
	crds := filepath.Join(suite.root, "config", "crd", "bases")
	o.kubectl("delete", "-f", crds, "--wait=true")
	t.Cleanup(func() { o.restoreSuite(crds) })

	// restoreSuite stops OLM after removing what it manages.
	o.start()

	o.kubectl("create", "namespace", olmInstallNamespace)
	o.applyYAML("clustercatalog", catalogManifest(a.catalog))
	o.waitCondition(clusterCatalogGVR, olmCatalogName, "Serving", "True")
	o.applyYAML("clusterextension", extensionManifest())
	ext := o.waitInstalled("0.1.0")
	t.Logf("ClusterExtension installed %s", ext)

	// What OLM created, in the ClusterExtension's namespace.
	// The CSV of the bundle pushed last (B's; A's permissions are the same).
	csv, err := bundle.ReadBundleCSV(filepath.Join(suite.root, "bin", "ship", "bundle", "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range []string{"nginxes.web.helmapp.io", "echoes.web.helmapp.io"} {
		o.kubectl("wait", "--for=condition=Established", "crd/"+crd, "--timeout="+deadline.String())
	}
	dep := o.operatorDeployment(a.operator)
	sa := dep.Spec.Template.Spec.ServiceAccountName
	if _, err := suite.kube.CoreV1().ServiceAccounts(olmInstallNamespace).Get(context.Background(), sa, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Deployment's ServiceAccount %s/%s: %v", olmInstallNamespace, sa, err)
	}
	o.checkRBAC(csv, sa)

	// The operator's pod cannot run on kwok: its binary runs here, as the
	// ServiceAccount OLM created, with the Deployment's args and env.
	apps := &env{t: t, ns: "olm-apps-" + rand.String(5), dir: testDir(t)}
	o.kubectl("create", "namespace", apps.ns)
	m := o.startManager(apps, dep, sa, "manager-0.1.0.log")
	apps.applyNginx("web", "  replicaCount: 1\n  page:\n    title: installed by OLM\n")
	o.applyEcho(apps, "hello", "hello from OLM")
	o.applyEcho(apps, "bye", "going away")
	web := apps.waitNginx("web", "nginx/web Ready", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
	for _, e := range []string{"hello", "bye"} {
		apps.kubectl("wait", "--for=condition=Ready", "echo/"+e, "--timeout="+deadline.String())
	}
	o.checkOperandImage(apps, "web", related["RELATED_IMAGE_NGINX"])
	// Change one, delete one.
	changeOneDeleteOne(apps, web)
	historyA := map[string][]helmRevision{"web": apps.helmHistory("web"), "hello": apps.helmHistory("hello")}

	// Version B: a new catalog image whose channel has B replacing A.
	o.kubectl("patch", "clustercatalog/"+olmCatalogName, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"source":{"image":{"ref":%q}}}}`, b.catalog))
	ext = o.waitInstalled("0.1.1")
	t.Logf("ClusterExtension upgraded: %s", ext)
	dep = o.operatorDeployment(b.operator)
	// The pod of A would be replaced by one of B: the same here.
	if err := m.stop(); err != nil {
		t.Errorf("%v (log %s)", err, m.logPath)
	}
	m = o.startManager(apps, dep, sa, "manager-0.1.1.log")
	o.waitReconciled(m, 2)
	for name, before := range historyA {
		after := apps.helmHistory(name)
		if len(after) != len(before) || after[len(after)-1].Status != "deployed" {
			t.Errorf("release %s: history %v after the upgrade of the operator, was %v: a new operator version over settled releases must write nothing", name, after, before)
		}
	}
	apps.waitNginx("web", "nginx/web still Ready", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
	apps.kubectl("wait", "--for=condition=Ready", "echo/hello", "--timeout="+deadline.String())

	if os.Getenv("OLM_DEMO") != "" {
		o.demo(apps, m)
	}

	// Removing the extension. OLM v1 uninstalls its Helm release: the
	// Deployment, the RBAC and the CRDs go; the API server then deletes every
	// custom resource of those CRDs. Their releases need no finalizer (every
	// object is in their namespace and carries their owner reference, no
	// delete hook): they go at once, and the garbage collector deletes their
	// objects and Helm's records after them (issue 41; before, they and the
	// CRDs stayed Terminating on a finalizer no one removed).
	o.kubectl("delete", "clusterextension/"+olmExtensionName, "--wait=false")
	o.waitGone("the operator's Deployment", func(ctx context.Context) error {
		_, err := suite.kube.AppsV1().Deployments(olmInstallNamespace).Get(ctx, dep.Name, metav1.GetOptions{})
		return err
	})
	if err := m.stop(); err != nil {
		t.Errorf("%v (log %s)", err, m.logPath)
	}
	o.waitGone("the ClusterExtension", func(ctx context.Context) error {
		_, err := suite.dyn.Resource(clusterExtensionGVR).Get(ctx, olmExtensionName, metav1.GetOptions{})
		return err
	})
	o.waitGone("the ServiceAccount", func(ctx context.Context) error {
		_, err := suite.kube.CoreV1().ServiceAccounts(olmInstallNamespace).Get(ctx, sa, metav1.GetOptions{})
		return err
	})
	o.assertRemoval(apps)
}

// demo (OLM_DEMO=1, make olm-demo) prints how to look at the cluster and
// waits for Ctrl-C.
func (o *olmRun) demo(apps *env, m *operator) {
	fmt.Fprintf(os.Stderr, `
== OLM v1 installed helm-app-operator from its catalog and upgraded it to 0.1.1 ==
  export KUBECONFIG=%s
  PATH=%s:$PATH
  kubectl get clustercatalog,clusterextension -o wide
  kubectl get clusterextension %s -o jsonpath='{.status.install}{"\n"}'
  kubectl get deploy,sa,role,rolebinding -n %s
  kubectl get crd | grep helmapp
  kubectl get nginx,echo -n %s
  helm history web -n %s
logs: catalogd and operator-controller in %s, the manager (running as the ServiceAccount OLM created) in %s
Ctrl-C stops everything.
`, suite.cp.KubeconfigPath, suite.cp.AssetsDir, olmExtensionName, olmInstallNamespace, apps.ns, apps.ns, o.dir, m.logPath)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
}
