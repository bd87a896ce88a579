//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
	img "github.com/helmapp/helm-app-operator/internal/tooling/image"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

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
	// custom resource of those CRDs. With the operator gone, nothing removes
	// their finalizer, so they and the CRDs stay Terminating (and the
	// operands keep running) until the user removes it.
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
	o.reportRemoval(apps)
}

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
	ctx, cancel := context.WithTimeout(context.Background(), olmDeadline)
	defer cancel()
	last := ""
	for {
		if err := o.exited(); err != nil {
			o.t.Fatalf("waiting for %s: %v", what, err)
		}
		ok, obs := check(ctx)
		if ok {
			return
		}
		last = obs
		select {
		case <-ctx.Done():
			o.t.Fatalf("waiting for %s: not within %s; last seen: %s\nOLM logs in %s", what, olmDeadline, last, o.dir)
		case <-time.After(time.Second):
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

// checkRBAC checks that what the CSV grants exists, bound to sa. The
// ClusterExtension installs in AllNamespaces mode, so OLM (as v0 does for a
// global OperatorGroup) makes each clusterPermissions entry and each
// permissions entry a ClusterRole and a ClusterRoleBinding, adding to the
// latter get, list and watch on namespaces.
func (o *olmRun) checkRBAC(csv *v1alpha1.ClusterServiceVersion, sa string) {
	o.t.Helper()
	ctx := context.Background()
	crbs, err := suite.kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: olmOwnerNameLabel + "=" + olmExtensionName})
	if err != nil {
		o.t.Fatal(err)
	}
	rules := func(name string) ([]rbacv1.PolicyRule, error) {
		r, err := suite.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Rules, nil
	}
	want := map[string][]rbacv1.PolicyRule{}
	for i, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		want[fmt.Sprintf("clusterPermissions[%d] (%s)", i, p.ServiceAccountName)] = p.Rules
	}
	for i, p := range csv.Spec.InstallStrategy.StrategySpec.Permissions {
		want[fmt.Sprintf("permissions[%d] (%s)", i, p.ServiceAccountName)] = append(slices.Clone(p.Rules),
			rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"namespaces"}})
	}
	for what, rs := range want {
		if !bound(rs, sa, crbs.Items, rules) {
			o.t.Errorf("no ClusterRole with the rules of the CSV's %s (%d rules) is bound to %s/%s", what, len(rs), olmInstallNamespace, sa)
		}
	}
}

// bound reports whether one of bindings binds sa to a ClusterRole whose
// rules are want (in any order).
func bound(want []rbacv1.PolicyRule, sa string, bindings []rbacv1.ClusterRoleBinding, rules func(string) ([]rbacv1.PolicyRule, error)) bool {
	for _, b := range bindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == olmInstallNamespace
		}) {
			continue
		}
		got, err := rules(b.RoleRef.Name)
		if err != nil {
			continue
		}
		if len(got) == len(want) && !slices.ContainsFunc(want, func(w rbacv1.PolicyRule) bool {
			return !slices.ContainsFunc(got, func(g rbacv1.PolicyRule) bool { return samePolicyRule(g, w) })
		}) {
			return true
		}
	}
	return false
}

func samePolicyRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// startManager runs the manager binary as ServiceAccount sa of the install
// namespace (a TokenRequest token) with the args and env of dep's manager
// container, from the checkout's root, which is laid out as the image's
// working directory (watches.yaml, helm-charts/). Two adjustments for a
// process outside a pod: the bind addresses get free loopback ports, and
// --leader-election-namespace is the pod's namespace, which in a pod it
// would read from its service account directory.
func (o *olmRun) startManager(apps *env, dep *appsv1.Deployment, sa, logName string) *operator {
	o.t.Helper()
	c := dep.Spec.Template.Spec.Containers[0]
	var args []string
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="), strings.HasPrefix(a, "--health-probe-bind-address="):
			a = a[:strings.Index(a, "=")+1] + freeLoopbackAddr(o.t)
		}
		args = append(args, a)
	}
	args = append(args, "--leader-election-namespace="+olmInstallNamespace)
	env := []string{"KUBECONFIG=" + saKubeconfig(o.t, o.dir, olmInstallNamespace, sa)}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env = append(env, e.Name+"="+fieldRef(dep, e.ValueFrom.FieldRef.FieldPath))
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		default:
			o.t.Fatalf("env %s of the Deployment: a source this test cannot resolve", e.Name)
		}
	}
	logPath := filepath.Join(apps.dir, logName)
	// Not the test's environment: only what the pod would have, plus PATH
	// and HOME.
	proc, err := controlplane.StartProcess(controlplane.Command{Name: "the manager", Binary: suite.manager, Args: args, Dir: suite.root,
		Env: append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + apps.dir}, env...), OnlyEnv: true, LogPath: logPath, KillWithParent: true})
	if err != nil {
		o.t.Fatal(err)
	}
	m := &operator{Process: proc, logPath: logPath, args: args}
	apps.op, apps.logPath = m, logPath
	o.t.Logf("manager as %s/%s: %s (env %s), pid %d, log %s", olmInstallNamespace, sa, strings.Join(args, " "), strings.Join(env[1:], " "), proc.Pid(), logPath)
	o.t.Cleanup(func() {
		if m.Exited() == nil {
			_ = m.stop()
		}
	})
	return m
}

// fieldRef resolves the downward API fields a manager container uses.
func fieldRef(dep *appsv1.Deployment, path string) string {
	meta := dep.Spec.Template.ObjectMeta
	if m := regexp.MustCompile(`^metadata\.annotations\['(.+)'\]$`).FindStringSubmatch(path); m != nil {
		return meta.Annotations[m[1]]
	}
	if path == "metadata.namespace" {
		return dep.Namespace
	}
	return ""
}

// checkOperandImage: the release's Deployment runs the operand image the
// bundle pinned (RELATED_IMAGE_* from OLM's Deployment reached the chart).
func (o *olmRun) checkOperandImage(apps *env, name, want string) {
	o.t.Helper()
	d, err := apps.deployment(context.Background(), name)
	if err != nil {
		o.t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
		o.t.Errorf("Deployment %s runs %s, want the bundle's pinned %s", name, got, want)
	}
}

// waitReconciled waits until manager m has finished at least n reconciles
// without error, read from its metrics endpoint with the token of a
// ServiceAccount bound to the bundle's metrics-reader ClusterRole (so the
// endpoint's authentication and authorization, done with the permissions OLM
// granted, are exercised too).
func (o *olmRun) waitReconciled(m *operator, n int) {
	o.t.Helper()
	addr := ""
	for _, a := range m.args {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			addr = v
		}
	}
	reader := "metrics-reader"
	o.kubectl("create", "serviceaccount", reader, "-n", olmInstallNamespace)
	o.kubectl("create", "clusterrolebinding", "olm-e2e-metrics-reader", "--clusterrole=helm-app-operator-metrics-reader",
		"--serviceaccount="+olmInstallNamespace+":"+reader)
	token := saToken(o.t, olmInstallNamespace, reader)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	// A settled resource's reconcile ends with RequeueAfter (its
	// reconcilePeriod): controller-runtime counts it as requeue_after.
	line := regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{[^}]*result="(?:success|requeue_after)"[^}]*\} (\d+)`)
	o.eventually(fmt.Sprintf("%d reconciles without error in the new manager's metrics", n), func(ctx context.Context) (bool, string) {
		if err := m.exited(); err != nil {
			o.t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, resp.Status
		}
		total := 0
		for _, mm := range line.FindAllStringSubmatch(string(body), -1) {
			v, _ := strconv.Atoi(mm[1])
			total += v
		}
		return total >= n, fmt.Sprintf("%d reconciles without error", total)
	})
}

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
