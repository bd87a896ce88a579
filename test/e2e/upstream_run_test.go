//go:build e2e

// The operator of a scratch project (upstream_project_test.go) running as a
// ServiceAccount bound to exactly the roles the command generated, and the
// status of its resources.

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// upstreamSA is the ServiceAccount the project's operator runs as (the
// name config/rbac gives the manager's).
const upstreamSA = "controller-manager"

// upstreamRun is a namespace of the suite's cluster with the project's CRD
// applied and its operator running there as upstreamSA, bound to nothing but
// the generated roles: manager-role by a RoleBinding in the namespace (the
// operator's own and the resources'), manager-cluster-role by a
// ClusterRoleBinding.
type upstreamRun struct {
	t       *testing.T
	p       *project
	ns, dir string
	op      *operator
	logPath string
	// user is the operator's identity, as RBAC denials name it.
	user string
	// chartCRDs are the names of the CRDs of the chart's crds/ (and its
	// subcharts').
	chartCRDs []string
	// denialsAllowed: RBAC denials in the operator's log are expected (the
	// test took a rule away); otherwise each one fails the test.
	denialsAllowed bool
}

// start creates the namespace, installs the project's CRDs, grants the roles
// and starts the operator binary manager from the project's root (its
// watches.yaml and helm-charts/, as in the image), with the environment
// config/manager gives it. Cleanup deletes the
// kind's resources while the operator runs (their releases uninstalled),
// stops it, and removes the namespace, the grants, the project's CRD and
// the chart's CRDs.
func (p *project) start(t *testing.T, manager string, namespaced, cluster []rbacv1.PolicyRule) *upstreamRun {
	t.Helper()
	r := &upstreamRun{t: t, p: p, ns: "up-" + rand.String(5), dir: p.dir}
	r.user = "system:serviceaccount:" + r.ns + ":" + upstreamSA
	r.chartCRDs = p.chartCRDs()
	r.kubectl("create", "namespace", r.ns)
	grants := []string{"clusterrole/" + r.ns + "-" + managerRole, "clusterrole/" + r.ns + "-" + managerClusterRole,
		"clusterrolebinding/" + r.ns + "-" + managerClusterRole}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		// The CRDs are gone before the next test, which may install them
		// again; the namespace goes in the background, as newEnv's.
		args := append([]string{"delete", "--ignore-not-found", "--wait=true"}, grants...)
		args = append(args, "crd/"+p.gvr.GroupResource().String())
		for _, c := range r.chartCRDs {
			args = append(args, "crd/"+c)
		}
		if out, err := suite.cp.Kubectl(ctx, args...); err != nil {
			t.Errorf("cleaning up: %v\n%s", err, out)
		}
		if out, err := suite.cp.Kubectl(ctx, "delete", "namespace", r.ns, "--wait=false"); err != nil {
			t.Errorf("cleaning up: %v\n%s", err, out)
		}
	})
	r.installCRDs()

	r.apply("grants", r.grants(namespaced, cluster))
	r.logPath = filepath.Join(r.dir, "operator.log")
	args := append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, strings.Fields(os.Getenv("E2E_OPERATOR_FLAGS"))...)
	proc, err := controlplane.StartProcess(controlplane.Command{Name: "the operator", Binary: manager, Args: args, Dir: p.root,
		Env: append(p.managerEnv(), "KUBECONFIG="+saKubeconfig(t, r.dir, r.ns, upstreamSA), "WATCH_NAMESPACE="+r.ns), LogPath: r.logPath, KillWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	r.op = &operator{Process: proc, logPath: r.logPath, args: args}
	t.Logf("namespace %s; operator of %s as serviceaccount %s/%s (%d namespaced rules, %d cluster rules), pid %d, log %s",
		r.ns, p.root, r.ns, upstreamSA, len(namespaced), len(cluster), proc.Pid(), r.logPath)
	t.Cleanup(func() {
		if err := r.op.stop(); err != nil {
			t.Errorf("%v (operator log: %s)", err, r.logPath)
		}
		r.checkDenials()
		r.sweep()
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		if out, err := suite.cp.Kubectl(ctx, "delete", p.gvr.GroupResource().String(), "--all", "-n", r.ns, "--timeout=90s"); err != nil {
			t.Errorf("deleting the test's resources (the operator uninstalls their releases): %v\n%s(operator log: %s)", err, out, r.logPath)
		}
	})
	return r
}

// grants is the ServiceAccount and the generated roles bound to it, as one
// manifest. The roles are ClusterRoles (as config/rbac has them) named
// after the namespace, so that tests do not share them.
func (r *upstreamRun) grants(namespaced, cluster []rbacv1.PolicyRule) string {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: upstreamSA, Namespace: r.ns}}
	objs := []any{
		map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": upstreamSA, "namespace": r.ns}},
		rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: r.ns + "-" + managerRole}, Rules: namespaced},
		rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: managerRole, Namespace: r.ns}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.ns + "-" + managerRole}},
		rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: r.ns + "-" + managerClusterRole}, Rules: cluster},
		rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: r.ns + "-" + managerClusterRole}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.ns + "-" + managerClusterRole}},
	}
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			r.t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// checkDenials fails the test for each RBAC denial of the ServiceAccount in
// the operator's log, even one the operator only logged (an informer's list
// or watch): the generated roles must be complete.
func (r *upstreamRun) checkDenials() {
	if r.denialsAllowed {
		return
	}
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		r.t.Error(err)
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, r.user) && strings.Contains(line, "cannot") {
			r.t.Errorf("the operator was denied what the generated roles should grant: %s", line)
		}
	}
}

// installCRDs does what `make install` does for the CRDs the cluster does
// not have yet (the project's new kind, and any the command put in
// config/crd): kustomize build config/crd, applied.
func (r *upstreamRun) installCRDs() {
	r.t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(r.p.root, "config", "crd"))
	if err != nil {
		r.t.Fatalf("kustomize build config/crd: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var docs, names []string
	for _, res := range res.Resources() {
		if _, err := suite.dyn.Resource(crdGVR).Get(ctx, res.GetName(), metav1.GetOptions{}); err == nil {
			continue // the suite's (TestMain applied config/crd/bases)
		}
		b, err := res.AsYAML()
		if err != nil {
			r.t.Fatal(err)
		}
		docs, names = append(docs, string(b)), append(names, "crd/"+res.GetName())
	}
	if !slices.Contains(names, "crd/"+r.p.gvr.GroupResource().String()) {
		r.t.Fatalf("kustomize build config/crd has no CRD %s, or the cluster has it already", r.p.gvr.GroupResource())
	}
	r.apply("crds", strings.Join(docs, "---\n"))
	r.kubectl(append([]string{"wait", "--for=condition=Established", "--timeout=" + deadline.String()}, names...)...)
}

// chartCRDs are the names of the CRDs in the crds/ of the kind's chart (the
// watches.yaml entry's) and of its subcharts.
func (p *project) chartCRDs() []string {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.root, "watches.yaml"))
	if err != nil {
		p.t.Fatal(err)
	}
	var entries []struct{ Group, Kind, Chart string }
	if err := yaml.Unmarshal(b, &entries); err != nil {
		p.t.Fatal(err)
	}
	for _, e := range entries {
		if e.Kind != p.kind || e.Group != p.gvr.Group {
			continue
		}
		ch, err := loader.Load(filepath.Join(p.root, e.Chart))
		if err != nil {
			p.t.Fatalf("loading the chart of %s: %v", p.kind, err)
		}
		var names []string
		for _, f := range ch.CRDObjects() {
			for _, doc := range strings.Split(string(f.File.Data), "\n---") {
				var c struct {
					Kind     string
					Metadata struct{ Name string }
				}
				if yaml.Unmarshal([]byte(doc), &c) == nil && c.Kind == "CustomResourceDefinition" {
					names = append(names, c.Metadata.Name)
				}
			}
		}
		return names
	}
	p.t.Fatalf("watches.yaml has no entry of %s %s", p.gvr.Group, p.kind)
	return nil
}

func (r *upstreamRun) kubectl(args ...string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline+30*time.Second)
	defer cancel()
	out, err := suite.cp.Kubectl(ctx, append([]string{"-n", r.ns}, args...)...)
	if err != nil {
		r.t.Fatalf("%v\n%s\noperator log: %s", err, out, r.logPath)
	}
	return out
}

func (r *upstreamRun) apply(name, manifest string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name+".yaml")
	if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.kubectl("apply", "-f", p)
}

// get reads the resource name of the project's kind.
func (r *upstreamRun) get(ctx context.Context, name string) (*nginx, error) {
	u, err := suite.dyn.Resource(r.p.gvr).Namespace(r.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	n := &nginx{}
	return n, fromUnstructured(u, n)
}

// wait polls the resource name until cond holds, and returns it; it fails
// after deadline with what it last saw, or at once if the operator exited.
func (r *upstreamRun) wait(name, what string, cond func(*nginx) bool) *nginx {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	last := ""
	for {
		if err := r.op.exited(); err != nil {
			r.t.Fatalf("waiting for %s: %v\nlast seen: %s\noperator log: %s", what, err, last, r.logPath)
		}
		n, err := r.get(ctx, name)
		if err == nil && cond(n) {
			return n
		}
		if err != nil {
			last = err.Error()
		} else {
			last = n.String()
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("waiting for %s: not within %s; last seen: %s\noperator log: %s", what, deadline, last, r.logPath)
		case <-time.After(pollInterval):
		}
	}
}

// settled: the status describes the current generation and the operator
// is no longer working on it (Ready True, or False for a reason that holds).
func settled(n *nginx) bool {
	rc := n.cond("Reconciling")
	return n.Status.ObservedGeneration == n.Metadata.Generation && n.cond("Ready") != nil &&
		n.cond("Ready").ObservedGeneration == n.Metadata.Generation && (rc == nil || rc.Status == metav1.ConditionFalse)
}
