//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// TestInstalledByOLMv0 installs the operator the OperatorHub way, through a
// real OLM v0 (olm and catalog, out of the cluster: see
// olmv0_cluster_test.go) from our catalog image: for each install mode
// tested, an OperatorGroup and a Subscription with installPlanApproval
// Manual, the InstallPlan approved, the CSV Succeeded; the manager run with
// what OLM granted; version B published and its InstallPlan approved; then
// the operator removed as OLM v0 removes it (Subscription and CSV deleted,
// CRDs kept).
//
// OLM_DEMO=1 (make olm-demo OLM=v0) stops after the upgrade of the first
// mode with everything running and prints how to look at it, until Ctrl-C.
func TestInstalledByOLMv0(t *testing.T) {
	o := newOLMv0(t)
	related := o.standIns()
	a := o.ship("0.1.0", "", related)
	b := o.ship("0.1.1", csvName("0.1.0"), related, a.bundle)
	o.start()

	// AllNamespaces first: its manager would also see the resources the
	// OwnNamespace run leaves behind in its namespace (CRDs and resources
	// stay when OLM v0 removes an operator).
	for _, mode := range []v1alpha1.InstallModeType{v1alpha1.InstallModeTypeAllNamespaces, v1alpha1.InstallModeTypeOwnNamespace} {
		o.installMode(mode, a, b)
	}
}

// installMode installs version a in a namespace of its own with an
// OperatorGroup of mode, runs the manager and its resources, upgrades to b
// and removes the operator.
func (o *olmV0) installMode(mode v1alpha1.InstallModeType, a, b shipped) {
	t := o.t
	t.Logf("== install mode %s ==", mode)
	global := mode == v1alpha1.InstallModeTypeAllNamespaces
	ns := "olmv0-" + strings.ToLower(string(mode)) + "-" + rand.String(5)
	o.installNS = ns
	// Published again for each mode: the catalog of A only.
	o.publish(a.catalog)
	var targets []string
	if !global {
		targets = []string{ns}
	}
	o.subscribe(ns, targets)
	o.approve(ns, csvName(a.version))
	csv := o.waitCSV(ns, csvName(a.version), "Succeeded")
	if !slices.ContainsFunc(csv.Spec.InstallModes, func(m v1alpha1.InstallMode) bool { return m.Type == mode && m.Supported }) {
		t.Fatalf("the CSV does not declare install mode %s", mode)
	}

	// What OLM created in the operator's namespace.
	dep := o.operatorDeployment(ns, csv.Name, a.operator)
	sa := dep.Spec.Template.Spec.ServiceAccountName
	if _, err := suite.kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), sa, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Deployment's ServiceAccount %s/%s: %v", ns, sa, err)
	}
	if got, want := dep.Spec.Template.Annotations[olmv0TargetsAnnotation], strings.Join(targets, ","); got != want {
		t.Errorf("the Deployment's pod template has %s=%q, want %q", olmv0TargetsAnnotation, got, want)
	}
	o.checkRBACv0(csv, ns, sa, global)

	// The manager, as the ServiceAccount OLM created, with the Deployment's
	// args and env (WATCH_NAMESPACE from olm.targetNamespaces).
	apps := &env{t: t, ns: ns, dir: testDir(t)}
	if global {
		apps.ns = "olmv0-apps-" + rand.String(5)
		o.kubectl("create", "namespace", apps.ns)
	}
	t.Cleanup(func() { releaseNamespace(t, apps.ns) })
	m := o.startManager(apps, dep, sa, "manager-"+a.version+".log")
	o.runResources(apps)
	historyA := map[string][]helmRevision{"web": apps.helmHistory("web"), "hello": apps.helmHistory("hello")}

	// Version B published: the CatalogSource pointed at the catalog of
	// both, B replacing A; its InstallPlan approved.
	o.publish(b.catalog)
	o.approve(ns, csvName(b.version))
	csv = o.waitCSV(ns, csvName(b.version), "Succeeded")
	o.waitGone("csv "+csvName(a.version), func(ctx context.Context) error {
		_, err := suite.dyn.Resource(csvGVR).Namespace(ns).Get(ctx, csvName(a.version), metav1.GetOptions{})
		return err
	})
	dep = o.operatorDeployment(ns, csv.Name, b.operator)
	o.checkRBACv0(csv, ns, sa, global)
	// The pod of A would be replaced by one of B: the same here.
	if err := m.stop(); err != nil {
		t.Errorf("%v (log %s)", err, m.logPath)
	}
	m = o.startManager(apps, dep, sa, "manager-"+b.version+".log")
	o.waitReconciled(m, 2)
	o.checkHistories(apps, historyA, "the upgrade of the operator")
	apps.waitNginx("web", "nginx/web still Ready", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
	apps.kubectl("wait", "--for=condition=Ready", "echo/hello", "--timeout="+deadline.String())

	if os.Getenv("OLM_DEMO") != "" {
		o.demo(apps, m, ns)
	}

	// Removed the OLM v0 way: the Subscription and the CSV deleted. OLM
	// removes what the CSV owns (the Deployment, its ServiceAccount, the
	// RBAC); it keeps the CRDs, so the resources stay, with their releases.
	o.kubectl("delete", "subscription/"+olmPackage, "csv/"+csv.Name, "-n", ns, "--wait=false")
	o.waitGone("the operator's Deployment", func(ctx context.Context) error {
		_, err := suite.kube.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
		return err
	})
	// The kubelet would stop its pod.
	if err := m.stop(); err != nil {
		t.Errorf("%v (log %s)", err, m.logPath)
	}
	o.waitGone("the ServiceAccount", func(ctx context.Context) error {
		_, err := suite.kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{})
		return err
	})
	o.eventually("no ClusterRoleBinding left bound to "+ns+"/"+sa, func(ctx context.Context) (bool, string) {
		crbs, err := suite.kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, b := range crbs.Items {
			if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Namespace == ns && s.Name == sa }) {
				left = append(left, b.Name)
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	o.checkRemoved(apps, historyA)
}

// runResources makes an Nginx and two Echoes Ready with the manager now
// running, changes one and deletes one.
func (o *olmV0) runResources(apps *env) {
	o.t.Helper()
	apps.applyNginx("web", "  replicaCount: 1\n  page:\n    title: installed by OLM v0\n")
	o.applyEcho(apps, "hello", "hello from OLM v0")
	o.applyEcho(apps, "bye", "going away")
	web := apps.waitNginx("web", "nginx/web Ready", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
	for _, e := range []string{"hello", "bye"} {
		apps.kubectl("wait", "--for=condition=Ready", "echo/"+e, "--timeout="+deadline.String())
	}
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

// checkHistories: each release's Helm history is still before (nothing
// written), its last revision deployed.
func (o *olmV0) checkHistories(apps *env, before map[string][]helmRevision, after string) {
	o.t.Helper()
	for name, was := range before {
		now := apps.helmHistory(name)
		if len(now) != len(was) || now[len(now)-1].Status != "deployed" {
			o.t.Errorf("release %s: history %v after %s, was %v", name, now, after, was)
		}
	}
}

// checkRemoved: with the operator removed, nothing of ours is being
// deleted or lost: the CRDs are kept, the resources exist and are not
// terminating, their releases untouched and their objects present.
func (o *olmV0) checkRemoved(apps *env, before map[string][]helmRevision) {
	o.t.Helper()
	ctx := context.Background()
	for _, name := range []string{"nginxes.web.helmapp.io", "echoes.web.helmapp.io"} {
		c, err := suite.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			o.t.Errorf("CRD %s after the operator's removal: %v (OLM v0 keeps CRDs)", name, err)
		case c.GetDeletionTimestamp() != nil:
			o.t.Errorf("CRD %s is being deleted after the operator's removal", name)
		}
	}
	for _, r := range []struct{ kind, name string }{{"nginx", "web"}, {"echo", "hello"}} {
		out, err := suite.cp.Kubectl(ctx, "get", r.kind+"/"+r.name, "-n", apps.ns, "-o", "jsonpath={.metadata.deletionTimestamp}")
		if err != nil || out != "" {
			o.t.Errorf("%s/%s after the operator's removal: %q %v, want it present and not being deleted", r.kind, r.name, out, err)
		}
	}
	o.checkHistories(apps, before, "the operator's removal")
	for _, d := range []string{"web", "hello"} {
		if _, err := apps.deployment(ctx, d); err != nil {
			o.t.Errorf("Deployment %s of release %s after the operator's removal: %v", d, d, err)
		}
	}
	out, _ := suite.cp.Kubectl(ctx, "get", "nginx,echo,deployment", "-n", apps.ns,
		"-o", "custom-columns=KIND:.kind,NAME:.metadata.name,DELETING:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers")
	o.t.Logf("after the Subscription and CSV were deleted, in %s:\n%s", apps.ns, out)
}

// releaseNamespace deletes namespace ns once the test is over, first
// releasing its custom resources from the finalizer of an operator that is
// gone.
func releaseNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
	defer cancel()
	for _, kind := range []string{"nginxes.web.helmapp.io", "echoes.web.helmapp.io"} {
		list, _ := suite.cp.Kubectl(ctx, "get", kind, "-n", ns, "--ignore-not-found", "-o", "name")
		for _, name := range strings.Fields(list) {
			_, _ = suite.cp.Kubectl(ctx, "patch", name, "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
	}
	if err := suite.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s: %v", ns, err)
	}
}

// demo (OLM_DEMO=1, make olm-demo OLM=v0) prints how to look at the
// cluster and waits for Ctrl-C.
func (o *olmV0) demo(apps *env, m *operator, ns string) {
	fmt.Fprintf(os.Stderr, `
== OLM v0 installed helm-app-operator from its catalog (Subscription, InstallPlan approved, CSV) and upgraded it to 0.1.1 ==
  export KUBECONFIG=%s
  PATH=%s:$PATH
  kubectl get catalogsource -n %s -o wide
  kubectl get operatorgroup,subscription,installplan,csv -n %s
  kubectl get deploy,sa,role,rolebinding -n %s
  kubectl get crd | grep helmapp
  kubectl get nginx,echo -n %s
  helm history web -n %s
logs: olm, catalog, opm serve and the bundle unpacks in %s, the manager (running as the ServiceAccount OLM created) in %s
Ctrl-C stops everything.
`, suite.cp.KubeconfigPath, suite.cp.AssetsDir, olmv0Namespace, ns, ns, apps.ns, apps.ns, o.dir, m.logPath)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
}
