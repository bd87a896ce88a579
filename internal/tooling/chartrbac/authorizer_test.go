package chartrbac

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// grantExactly creates the ServiceAccount name in probeNamespace holding
// exactly the rules: namespaced in probeNamespace (a Role), cluster ones
// cluster-wide (a ClusterRole), each bound to it; it returns a client acting
// as it.
func grantExactly(t *testing.T, admin client.Client, name string, namespaced, cluster []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := context.Background()
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: probeNamespace, Name: name}
	testutil.ServiceAccount(t, admin, probeNamespace, name, nil)
	testutil.Grant(t, admin, probeNamespace, name, namespaced, sa)
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-" + name}, Rules: cluster},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-" + name}, Subjects: []rbacv1.Subject{sa},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-" + name}},
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = admin.Delete(ctx, o)
		}
	})
	as := testutil.Impersonating(cfg, probeNamespace, name)
	// Wait until the authorizer sees both grants.
	testutil.WaitUntilAllowed(t, as, "get", "", "serviceaccounts", probeNamespace, grants(namespaced, "get", "", "serviceaccounts") || grants(cluster, "get", "", "serviceaccounts"))
	if len(cluster) > 0 {
		r := cluster[0]
		if len(r.Resources) > 0 && len(r.ResourceNames) == 0 && len(r.APIGroups) > 0 && r.APIGroups[0] != "*" && r.Resources[0] != "*" {
			testutil.WaitUntilAllowed(t, as, r.Verbs[0], r.APIGroups[0], r.Resources[0], "", true)
		}
	}
	return testutil.Client(t, as)
}

// ensureProbeNamespace creates the namespace the charts are rendered for.
func ensureProbeNamespace(t *testing.T, c client.Client) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// installOrder sorts objects as Helm installs them (releaseutil.InstallOrder;
// other kinds, such as webhook configurations, last).
func installOrder(objs []object) []object {
	rank := func(kind string) int {
		if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
			return i
		}
		return len(releaseutil.InstallOrder)
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b object) int { return rank(a.Kind) - rank(b.Kind) })
	return out
}

// defaultsRender renders ch with its defaults as Discover does.
func defaultsRender(t *testing.T, ch *chart.Chart, n *Needs) *render {
	t.Helper()
	var custom []apiKind
	for _, k := range n.CRDs {
		custom = append(custom, apiKind{Group: k.Group, Version: k.Version, Kind: k.Kind, Resource: k.Resource, Namespaced: k.Namespaced})
	}
	r, err := newRenderer(ch, custom)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := r.renderAs(probeRelease, "defaults", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// TestGeneratedRulesInstallTheChart checks the rules Discover generates
// against a real kube-apiserver's RBAC authorizer: an identity holding
// exactly them applies the chart's crds/, creates every object the chart's
// default render makes, hooks included, in Helm's order — its ClusterRoles,
// Roles and bindings too, which Kubernetes allows only to whoever holds
// their rules — and deletes them again. Without the rules of the chart's
// roles (escalation), creating its first role is refused.
func TestGeneratedRulesInstallTheChart(t *testing.T) {
	admin := testutil.Client(t, cfg)
	ensureProbeNamespace(t, admin)
	for _, tc := range []struct {
		name string
		rc   realChart
	}{{"sealed-secrets", sealedSecrets}, {"gatekeeper", gatekeeper}, {"secrets-store-csi-driver", csiDriver}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ch := tc.rc.load(t)
			n, err := Discover(ch)
			if err != nil {
				t.Fatal(err)
			}
			rr := defaultsRender(t, ch, n)
			objs := installOrder(rr.Objects)

			// Without the rules of the chart's roles, the operator may not
			// create them: Kubernetes' escalation check.
			var withoutRoles []rbacv1.PolicyRule
			for i, r := range n.Cluster {
				if !strings.Contains(n.ClusterWhy[i], escalationWhy) {
					withoutRoles = append(withoutRoles, r)
				}
			}
			var nsWithoutRoles []rbacv1.PolicyRule
			for i, r := range n.Namespaced {
				if !strings.Contains(n.NamespacedWhy[i], escalationWhy) {
					nsWithoutRoles = append(nsWithoutRoles, r)
				}
			}
			short := grantExactly(t, admin, "op-"+tc.name+"-short", nsWithoutRoles, withoutRoles)
			firstRole := slices.IndexFunc(objs, func(o object) bool { return o.Kind == "ClusterRole" && len(o.u.Object["rules"].([]any)) > 0 })
			if firstRole < 0 {
				t.Fatal("the chart renders no ClusterRole with rules")
			}
			o := objs[firstRole].u.DeepCopy()
			err = short.Create(ctx, o)
			if err == nil {
				_ = admin.Delete(ctx, o)
				t.Fatalf("ClusterRole %s was created without the rules it grants", o.GetName())
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "attempting to grant RBAC permissions not currently held") {
				t.Fatalf("ClusterRole %s without its rules: %v, want Forbidden for privilege escalation", o.GetName(), err)
			}

			op := grantExactly(t, admin, "op-"+tc.name, n.Namespaced, n.Cluster)
			// crds/, as the operator applies them (create, then get until
			// Established).
			for _, c := range ch.CRDObjects() {
				for _, doc := range releaseutil.SplitManifests(string(c.File.Data)) {
					crd, err := decode(doc, "", probeRelease, false)
					if err != nil {
						t.Fatal(err)
					}
					for _, co := range crd {
						if err := op.Create(ctx, co.u); err != nil && !apierrors.IsAlreadyExists(err) {
							t.Fatalf("creating CRD %s of %s: %v", co.Name, c.Name, err)
						}
						waitEstablished(t, op, co.Name)
					}
				}
			}
			var created []*unstructured.Unstructured
			t.Cleanup(func() {
				for _, u := range slices.Backward(created) {
					_ = admin.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground))
				}
			})
			for _, o := range objs {
				u := o.u.DeepCopy()
				k := n.kind(o)
				if k == nil || k.Resource == "" {
					t.Logf("skipped %s %s (%s): unresolved", o.Kind, o.Name, o.Template)
					continue
				}
				if k.Namespaced && u.GetNamespace() == "" {
					u.SetNamespace(probeNamespace)
				}
				if err := op.Create(ctx, u); err != nil {
					t.Errorf("creating %s %s (%s) under the generated rules: %v", o.Kind, o.Name, o.Template, err)
					continue
				}
				created = append(created, u)
				if err := op.Patch(ctx, u, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"patched":"yes"}}}`))); err != nil {
					t.Errorf("patching %s %s under the generated rules: %v", o.Kind, o.Name, err)
				}
			}
			if len(created) < 5 {
				t.Errorf("only %d objects created", len(created))
			}
			for _, u := range slices.Backward(created) {
				// Background, as Helm deletes: a Job's default (orphan)
				// waits for the garbage collector, which this API server
				// does not run.
				if err := op.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting %s %s under the generated rules: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}

// kind is the Kind n found for object o.
func (n *Needs) kind(o object) *Kind {
	for i, k := range n.Kinds {
		if k.Group == o.Group && k.Version == o.Version && k.Kind == o.Kind {
			return &n.Kinds[i]
		}
	}
	return nil
}

func waitEstablished(t *testing.T, c client.Client, name string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, "CRD "+name+" Established", func() (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cc := range conds {
			if m, _ := cc.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, ""
			}
		}
		return false, "not yet"
	})
}

// TestAggregatedClusterRole: a chart's aggregated ClusterRole gets no
// rule but an unresolved line, because the API server lets only a user with
// escalate on every ClusterRole create one: escalate limited to the role's
// name is refused (a create names no object), unlimited is allowed.
func TestAggregatedClusterRole(t *testing.T) {
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "agg", Version: "0.1.0", APIVersion: "v2"}, Templates: []*chart.File{{Name: "templates/roles.yaml", Data: []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .Release.Name }}-agg
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      agg.example.com/aggregate: "true"
rules: []
`)}}}
	n, err := Discover(ch)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(n.Cluster, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "escalate") }) {
		t.Errorf("escalate written: %v", n.Cluster)
	}
	if !slices.ContainsFunc(n.Unresolved, func(s string) bool {
		return strings.HasPrefix(s, "templates/roles.yaml: ClusterRole {{release}}-agg has an aggregationRule")
	}) {
		t.Errorf("no unresolved line for the aggregated role: %v", n.Unresolved)
	}

	admin := testutil.Client(t, cfg)
	ensureProbeNamespace(t, admin)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg-x7q-test"},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"agg.example.com/aggregate": "true"}}}}}
	escalate := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"escalate"}}
	named := *escalate.DeepCopy()
	named.ResourceNames = []string{role.Name}
	if err := grantExactly(t, admin, "op-agg-named", nil, append(slices.Clone(n.Cluster), named)).Create(context.Background(), role.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("an aggregated ClusterRole created with escalate on its name only: %v", err)
	}
	op := grantExactly(t, admin, "op-agg", nil, append(slices.Clone(n.Cluster), escalate))
	testutil.WaitUntilAllowed(t, testutil.Impersonating(cfg, probeNamespace, "op-agg"), "escalate", rbacv1.GroupName, "clusterroles", "", true)
	if err := op.Create(context.Background(), role.DeepCopy()); err != nil {
		t.Errorf("creating the aggregated ClusterRole with escalate on every ClusterRole: %v", err)
	}
	_ = admin.Delete(context.Background(), role)
}
