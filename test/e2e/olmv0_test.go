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
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// TestInstalledByOLMv0 installs the operator the OperatorHub way, through a
// real OLM v0 (olm and catalog, out of the cluster: see
// olmv0_cluster_test.go) from our catalog image: for each install mode
// tested (AllNamespaces, OwnNamespace, MultiNamespace), an OperatorGroup and
// a Subscription with installPlanApproval Manual, the InstallPlan approved,
// the CSV Succeeded, the RBAC OLM v0 grants in that mode; the manager run
// with what OLM granted; version B published and its InstallPlan approved
// (AllNamespaces, OwnNamespace); then the operator removed as OLM v0 removes
// it (Subscription and CSV deleted, CRDs kept).
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
	// other runs leave behind in their namespaces (CRDs and resources stay
	// when OLM v0 removes an operator). MultiNamespace (two target
	// namespaces, neither the operator's) is run without the upgrade: it
	// adds what OLM v0 does per target namespace (the Roles copied there).
	for _, mode := range []v1alpha1.InstallModeType{v1alpha1.InstallModeTypeAllNamespaces, v1alpha1.InstallModeTypeOwnNamespace,
		v1alpha1.InstallModeTypeMultiNamespace} {
		o.installMode(mode, a, b)
	}
}

// releaseAt is a resource's release and its Helm history at some point.
type releaseAt struct {
	e          *env
	kind, name string
	history    []helmRevision
}

// installMode installs version a in a namespace of its own with an
// OperatorGroup of mode, runs the manager and its resources, upgrades to b
// (but for MultiNamespace) and removes the operator.
func (o *olmV0) installMode(mode v1alpha1.InstallModeType, a, b shipped) {
	t := o.t
	t.Logf("== install mode %s ==", mode)
	ns := "olmv0-" + strings.ToLower(string(mode)) + "-" + rand.String(5)
	o.installNS = ns
	// Published again for each mode: the catalog of A only.
	o.publish(a.catalog)
	// The target namespaces (nil: all), and where the resources go.
	var targets, appNamespaces []string
	switch mode {
	case v1alpha1.InstallModeTypeAllNamespaces:
		appNamespaces = []string{"olmv0-apps-" + rand.String(5)}
	case v1alpha1.InstallModeTypeOwnNamespace:
		targets = []string{ns}
		appNamespaces = targets
	case v1alpha1.InstallModeTypeMultiNamespace:
		targets = []string{ns + "-a", ns + "-b"}
		appNamespaces = targets
	}
	var apps []*env
	for _, n := range appNamespaces {
		if n != ns {
			o.kubectl("create", "namespace", n)
		}
		apps = append(apps, &env{t: t, ns: n, dir: testDir(t)})
		t.Cleanup(func() { releaseNamespace(t, n) })
	}
	if !slices.Contains(appNamespaces, ns) {
		t.Cleanup(func() { releaseNamespace(t, ns) })
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
	// In any order; "" for all namespaces.
	got, want := dep.Spec.Template.Annotations[olmv0TargetsAnnotation], strings.Join(targets, ",")
	if !sameSet(strings.Split(got, ","), strings.Split(want, ",")) {
		t.Errorf("the Deployment's pod template has %s=%q, want %q", olmv0TargetsAnnotation, got, want)
	}
	o.checkRBACv0(csv, ns, sa, targets)
	// Those ClusterRoles carry the CSV's owner labels (the removal below
	// waits for none to be left).
	if crs, err := suite.kube.RbacV1().ClusterRoles().List(context.Background(), metav1.ListOptions{LabelSelector: csvOwnedSelector(ns)}); err != nil {
		t.Fatal(err)
	} else if len(crs.Items) == 0 {
		t.Errorf("no ClusterRole labelled %s, want those of the CSV's clusterPermissions", csvOwnedSelector(ns))
	}

	// The manager, as the ServiceAccount OLM created, with the Deployment's
	// args and env (WATCH_NAMESPACE from olm.targetNamespaces).
	m := o.startManager(apps[0], dep, sa, "manager-"+a.version+".log")
	for _, e := range apps[1:] {
		e.op, e.logPath = m, m.logPath
	}
	var releases []releaseAt
	if mode == v1alpha1.InstallModeTypeMultiNamespace {
		// One resource in each target namespace.
		apps[0].applyNginx("web", "  replicaCount: 1\n")
		o.applyEcho(apps[1], "hello", "hello from OLM v0")
		apps[0].waitNginx("web", "nginx/web Ready", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
		apps[1].kubectl("wait", "--for=condition=Ready", "echo/hello", "--timeout="+deadline.String())
		releases = []releaseAt{{e: apps[0], kind: "nginx", name: "web"}, {e: apps[1], kind: "echo", name: "hello"}}
	} else {
		o.runResources(apps[0])
		releases = []releaseAt{{e: apps[0], kind: "nginx", name: "web"}, {e: apps[0], kind: "echo", name: "hello"}}
	}
	for i := range releases {
		releases[i].history = releases[i].e.helmHistory(releases[i].name)
	}

	if mode != v1alpha1.InstallModeTypeMultiNamespace {
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
		o.checkRBACv0(csv, ns, sa, targets)
		// The pod of A would be replaced by one of B: the same here.
		if err := m.stop(); err != nil {
			t.Errorf("%v (log %s)", err, m.logPath)
		}
		m = o.startManager(apps[0], dep, sa, "manager-"+b.version+".log")
		o.waitReconciled(m, 2)
		o.checkHistories(releases, "the upgrade of the operator")
		apps[0].waitNginx("web", "nginx/web still Ready", func(n *nginx) bool { return n.is("Ready", metav1.ConditionTrue) })
		apps[0].kubectl("wait", "--for=condition=Ready", "echo/hello", "--timeout="+deadline.String())
		if os.Getenv("OLM_DEMO") != "" && mode == v1alpha1.InstallModeTypeAllNamespaces {
			o.demo(apps[0], m, ns)
		}
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
	o.eventually("no ClusterRole of the CSV, no ClusterRoleBinding or RoleBinding of "+ns+"/"+sa+" left", func(ctx context.Context) (bool, string) {
		left, err := bindingsOf(ctx, ns, sa, append([]string{ns}, targets...))
		if err != nil {
			return false, err.Error()
		}
		// The OperatorGroup's own aggregated ClusterRoles (olm.og.*) stay
		// with it.
		crs, err := suite.kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: csvOwnedSelector(ns)})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range crs.Items {
			left = append(left, "clusterrole/"+r.Name)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	o.checkRemoved(releases)
	o.checkDeletedWithoutOperator(releases)
}

// bindingsOf names the ClusterRoleBindings, and the RoleBindings of
// namespaces, that bind ServiceAccount ns/sa.
func bindingsOf(ctx context.Context, ns, sa string, namespaces []string) ([]string, error) {
	subject := func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Namespace == ns && s.Name == sa }
	var left []string
	crbs, err := suite.kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, b := range crbs.Items {
		if slices.ContainsFunc(b.Subjects, subject) {
			left = append(left, "clusterrolebinding/"+b.Name)
		}
	}
	for _, n := range namespaces {
		rbs, err := suite.kube.RbacV1().RoleBindings(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, b := range rbs.Items {
			if slices.ContainsFunc(b.Subjects, subject) {
				left = append(left, "rolebinding/"+n+"/"+b.Name)
			}
		}
	}
	return left, nil
}

// csvOwnedSelector selects what OLM v0 made for a CSV of namespace ns.
func csvOwnedSelector(ns string) string {
	return "olm.owner.kind=ClusterServiceVersion,olm.owner.namespace=" + ns
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
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
	changeOneDeleteOne(apps, web)
}

// checkHistories: each release's Helm history is still what was recorded
// (nothing written), its last revision deployed.
func (o *olmV0) checkHistories(releases []releaseAt, after string) {
	o.t.Helper()
	for _, r := range releases {
		now := r.e.helmHistory(r.name)
		if len(now) != len(r.history) || now[len(now)-1].Status != "deployed" {
			o.t.Errorf("release %s/%s: history %v after %s, was %v", r.e.ns, r.name, now, after, r.history)
		}
	}
}

// checkRemoved: with the operator removed, nothing of ours is being
// deleted or lost: the CRDs are kept, the resources exist and are not
// terminating, their releases untouched and their objects present.
func (o *olmV0) checkRemoved(releases []releaseAt) {
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
	for _, r := range releases {
		out, err := suite.cp.Kubectl(ctx, "get", r.kind+"/"+r.name, "-n", r.e.ns, "-o", "jsonpath={.metadata.deletionTimestamp}/{.metadata.uid}")
		deleting, uid, _ := strings.Cut(out, "/")
		if err != nil || deleting != "" {
			o.t.Errorf("%s/%s in %s after the operator's removal: %q %v, want it present and not being deleted", r.kind, r.name, r.e.ns, out, err)
			continue
		}
		// Each chart's Deployment is named after its release, and still
		// owned by its resource (nothing orphaned).
		d, err := r.e.deployment(ctx, r.name)
		if err != nil {
			o.t.Errorf("Deployment %s of release %s/%s after the operator's removal: %v", r.name, r.e.ns, r.name, err)
			continue
		}
		if !slices.ContainsFunc(d.OwnerReferences, func(ref metav1.OwnerReference) bool { return string(ref.UID) == uid }) {
			o.t.Errorf("Deployment %s/%s after the operator's removal: owners %+v, want %s/%s (uid %s)", r.e.ns, r.name, d.OwnerReferences, r.kind, r.name, uid)
		}
	}
	o.checkHistories(releases, "the operator's removal")
	seen := map[string]bool{}
	for _, r := range releases {
		if seen[r.e.ns] {
			continue
		}
		seen[r.e.ns] = true
		out, _ := suite.cp.Kubectl(ctx, "get", "nginx,echo,deployment", "-n", r.e.ns,
			"-o", "custom-columns=KIND:.kind,NAME:.metadata.name,DELETING:.metadata.deletionTimestamp,FINALIZERS:.metadata.finalizers")
		o.t.Logf("after the Subscription and CSV were deleted, in %s:\n%s", r.e.ns, out)
	}
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

// checkDeletedWithoutOperator: the operator removed, an administrator
// deletes the resources it left. None carries the finalizer (their charts'
// objects all carry the resource's owner reference, issue 41), so nothing
// stays in deletion: within 60 s each resource, its release's Deployment
// and its Helm records are gone, taken by the garbage collector.
func (o *olmV0) checkDeletedWithoutOperator(releases []releaseAt) {
	o.t.Helper()
	for _, r := range releases {
		r.e.kubectl("delete", r.kind+"/"+r.name, "--wait=false")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, r := range releases {
		for {
			var left []string
			if out, err := r.e.tryKubectl("get", r.kind+"/"+r.name, "--ignore-not-found", "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
				left = append(left, fmt.Sprintf("%s/%s %v", r.kind, r.name, err))
			}
			if _, err := r.e.deployment(ctx, r.name); err == nil {
				left = append(left, "deployment/"+r.name)
			}
			if recs, _, err := r.e.releaseRecords(r.name); err != nil || len(recs) > 0 {
				left = append(left, fmt.Sprintf("%d Helm record(s) %v", len(recs), err))
			}
			if len(left) == 0 {
				break
			}
			if ctx.Err() != nil {
				o.t.Errorf("60 s after %s/%s in %s was deleted with no operator running: %s left", r.kind, r.name, r.e.ns, strings.Join(left, ", "))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	o.t.Logf("the %d resource(s) the removed operator left, deleted: gone with their releases (garbage collector)", len(releases))
}
