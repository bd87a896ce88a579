package chartrbac

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// kindOf finds the kind named kind (group/Kind) in n.
func kindOf(n *Needs, groupKind string) *Kind {
	for i, k := range n.Kinds {
		if k.Group+"/"+k.Kind == groupKind {
			return &n.Kinds[i]
		}
	}
	return nil
}

// grants says whether rules let verb on group/resource (cluster-wide or in
// any namespace, whichever rules are), with no resourceNames limit.
func grants(rules []rbacv1.PolicyRule, verb, group, resource string) bool {
	for _, r := range rules {
		if len(r.ResourceNames) > 0 {
			continue
		}
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

// checkJustified checks that each rule says why it is there.
func checkJustified(t *testing.T, n *Needs) {
	t.Helper()
	if len(n.NamespacedWhy) != len(n.Namespaced) || len(n.ClusterWhy) != len(n.Cluster) {
		t.Fatalf("%d namespaced rules, %d reasons; %d cluster rules, %d reasons", len(n.Namespaced), len(n.NamespacedWhy), len(n.Cluster), len(n.ClusterWhy))
	}
	for i, w := range append(slices.Clone(n.NamespacedWhy), n.ClusterWhy...) {
		if !strings.Contains(w, "templates/") && !strings.Contains(w, "crds/") {
			t.Errorf("rule %d's reason names no template: %q", i, w)
		}
	}
	for _, k := range n.Kinds {
		if k.Resource == "" {
			continue
		}
		var rules []rbacv1.PolicyRule
		if !k.Namespaced || len(k.Namespaces) > 0 {
			rules = n.Cluster
		} else {
			rules = n.Namespaced
		}
		for _, v := range chartVerbs {
			if !grants(rules, v, k.Group, k.Resource) {
				t.Errorf("%s (%v) is created, but no rule grants %s on %s", k, k.Templates, v, k.Resource)
			}
		}
		if grants(append(slices.Clone(n.Namespaced), n.Cluster...), "update", k.Group, k.Resource) && !anyRoleGrants(n, k) {
			t.Errorf("%s: update granted, which no chart needs", k)
		}
	}
}

// anyRoleGrants says whether a rule from one of the chart's own roles covers k
// (those rules are the chart's, verbs and all).
func anyRoleGrants(n *Needs, k Kind) bool {
	for i, r := range append(slices.Clone(n.Namespaced), n.Cluster...) {
		why := append(slices.Clone(n.NamespacedWhy), n.ClusterWhy...)[i]
		if strings.Contains(why, escalationWhy) && (slices.Contains(r.Resources, k.Resource) || slices.Contains(r.Resources, "*")) {
			return true
		}
	}
	return false
}

func hasScope(rules []watches.ScopeRule, group, kind, name string) bool {
	return slices.ContainsFunc(rules, func(r watches.ScopeRule) bool {
		return r.Group == group && r.Kind == kind && slices.Contains(r.Names, name)
	})
}

// TestDiscoverSealedSecrets: a controller with cluster RBAC and a CRD in
// crds/ (bitnami-labs/sealed-secrets v0.32.2, helm/sealed-secrets).
func TestDiscoverSealedSecrets(t *testing.T) {
	n, err := Discover(sealedSecrets.load(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		kind, found string
		namespaced  bool
	}{
		{"apps/Deployment", "defaults", true},
		{"/Service", "defaults", true},
		{"/ServiceAccount", "defaults", true},
		{"rbac.authorization.k8s.io/ClusterRole", "defaults", false},
		{"rbac.authorization.k8s.io/ClusterRoleBinding", "defaults", false},
		{"rbac.authorization.k8s.io/Role", "defaults", true},
		{"networking.k8s.io/Ingress", "values ingress.enabled=true", true},
		{"networking.k8s.io/NetworkPolicy", "values networkPolicy.enabled=true", true},
		{"policy/PodDisruptionBudget", "values pdb.create=true", true},
		// tls-secret.yaml renders only with a certificate and key given:
		// no toggle makes it, its text names it.
		{"/Secret", "template text", true},
	} {
		k := kindOf(n, want.kind)
		if k == nil {
			t.Errorf("%s not found", want.kind)
			continue
		}
		if k.Found != want.found || k.Namespaced != want.namespaced || k.Resource == "" {
			t.Errorf("%s: found by %q, namespaced %v, resource %q; want %q, %v", want.kind, k.Found, k.Namespaced, k.Resource, want.found, want.namespaced)
		}
	}
	// The CRD of crds/ is known (a SealedSecret would resolve) but not a
	// kind the chart creates; applying it needs create on CRDs, never delete.
	if !slices.ContainsFunc(n.CRDs, func(k Kind) bool { return k.Kind == "SealedSecret" && k.Resource == "sealedsecrets" && k.Namespaced }) {
		t.Errorf("SealedSecret is not known from crds/: %v", n.CRDs)
	}
	if kindOf(n, "bitnami.com/SealedSecret") != nil || kindOf(n, "apiextensions.k8s.io/CustomResourceDefinition") != nil {
		t.Errorf("a CRD of crds/ is counted as a kind the chart creates")
	}
	if !grants(n.Cluster, "create", "apiextensions.k8s.io", "customresourcedefinitions") || grants(n.Cluster, "delete", "apiextensions.k8s.io", "customresourcedefinitions") {
		t.Errorf("the crds/ rule: want create and no delete on customresourcedefinitions, got %v", n.Cluster)
	}
	// The ClusterRole secrets-unsealer's rules are the operator's too.
	if !grants(n.Cluster, "update", "bitnami.com", "sealedsecrets/status") {
		t.Errorf("the rules of ClusterRole secrets-unsealer are not held: %v", n.Cluster)
	}
	// Kinds that need an API this Kubernetes does not serve, or a CRD
	// someone else installs, are unresolved, with their template.
	for _, want := range []string{"templates/servicemonitor.yaml: ServiceMonitor monitoring.coreos.com/v1", "templates/psp.yaml: PodSecurityPolicy policy/v1beta1"} {
		if !slices.ContainsFunc(n.Unresolved, func(u string) bool { return strings.HasPrefix(u, want) }) {
			t.Errorf("unresolved %q missing: %v", want, n.Unresolved)
		}
	}
	// Scope: the fixed-name ClusterRole, and the bindings named after the
	// release (both shapes of the fullname helper).
	for _, want := range []struct{ kind, name string }{{"ClusterRole", "secrets-unsealer"}, {"ClusterRoleBinding", "{{release}}-sealed-secrets"}, {"ClusterRoleBinding", "{{release}}"}} {
		if !hasScope(n.Scope.ClusterScoped, "rbac.authorization.k8s.io", want.kind, want.name) {
			t.Errorf("scope lacks %s %s: %+v", want.kind, want.name, n.Scope.ClusterScoped)
		}
	}
	if !slices.ContainsFunc(n.Notes, func(s string) bool { return strings.Contains(s, "AllNamespaces") }) {
		t.Errorf("no note on the install mode: %v", n.Notes)
	}
	// networkpolicy.yaml looks up the Endpoints default/kubernetes, as the
	// operator: get on that name alone.
	lookup := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"get"}, ResourceNames: []string{"kubernetes"}}
	if !slices.ContainsFunc(n.Cluster, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, lookup) }) {
		t.Errorf("no rule for the lookup of Endpoints kubernetes: %v", n.Cluster)
	}
	checkJustified(t, n)
}

// TestDiscoverGatekeeper: many CRDs, webhook configurations, hooks with
// Jobs (open-policy-agent/gatekeeper v3.20.1, charts/gatekeeper).
func TestDiscoverGatekeeper(t *testing.T) {
	n, err := Discover(gatekeeper.load(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"admissionregistration.k8s.io/ValidatingWebhookConfiguration", "admissionregistration.k8s.io/MutatingWebhookConfiguration",
		"batch/Job", "apps/Deployment", "/ResourceQuota", "policy/PodDisruptionBudget", "rbac.authorization.k8s.io/ClusterRole"} {
		if kindOf(n, want) == nil {
			t.Errorf("%s not found", want)
		}
	}
	if j := kindOf(n, "batch/Job"); j != nil && !j.Hook {
		t.Errorf("the Jobs are hooks, Discover says not")
	}
	if len(n.CRDs) < 16 {
		t.Errorf("%d CRD kinds known, want the 16 CRDs of crds/ at least", len(n.CRDs))
	}
	// The Connection of the audit's violation export is a kind of the
	// chart's own CRDs, found in the template's text.
	if c := kindOf(n, "connection.gatekeeper.sh/Connection"); c == nil || c.Resource != "connections" {
		t.Errorf("Connection (connection.gatekeeper.sh) not resolved from the chart's CRDs: %+v", c)
	}
	for _, want := range []struct{ kind, name string }{{"ValidatingWebhookConfiguration", "gatekeeper-validating-webhook-configuration"}, {"MutatingWebhookConfiguration", "gatekeeper-mutating-webhook-configuration"}} {
		if !hasScope(n.Scope.ClusterScoped, "admissionregistration.k8s.io", want.kind, want.name) {
			t.Errorf("scope lacks %s %s", want.kind, want.name)
		}
	}
	// Its manager's ClusterRole reads everything ("*"): the operator must
	// hold that to create it, and the author is told.
	if !slices.ContainsFunc(n.Notes, func(s string) bool {
		return strings.Contains(s, "wildcard") && strings.Contains(s, "gatekeeper-manager-role")
	}) {
		t.Errorf("no note on the wildcard of gatekeeper-manager-role: %v", n.Notes)
	}
	// Its roles create CRDs (the manager's, the CRD upgrade hook's): the
	// bundle's CRD warning cannot be avoided, and the author is told.
	if !slices.ContainsFunc(n.Notes, func(s string) bool { return strings.Contains(s, "creates CustomResourceDefinitions beyond its crds/") }) {
		t.Errorf("no note on the chart's roles creating CRDs: %v", n.Notes)
	}
	checkJustified(t, n)
}

// TestDiscoverSecretsStoreCSIDriver: a DaemonSet and a CSIDriver, no
// values.schema.json (kubernetes-sigs/secrets-store-csi-driver v1.5.4).
func TestDiscoverSecretsStoreCSIDriver(t *testing.T) {
	n, err := Discover(csiDriver.load(t))
	if err != nil {
		t.Fatal(err)
	}
	if k := kindOf(n, "apps/DaemonSet"); k == nil || !slices.Contains(k.Templates, "templates/secrets-store-csi-driver.yaml") {
		t.Errorf("DaemonSet: %+v", k)
	}
	if k := kindOf(n, "storage.k8s.io/CSIDriver"); k == nil || k.Namespaced || k.Resource != "csidrivers" {
		t.Errorf("CSIDriver: %+v", k)
	}
	if !hasScope(n.Scope.ClusterScoped, "storage.k8s.io", "CSIDriver", "secrets-store.csi.k8s.io") {
		t.Errorf("scope lacks CSIDriver secrets-store.csi.k8s.io: %+v", n.Scope.ClusterScoped)
	}
	if !grants(n.Cluster, "create", "storage.k8s.io", "csidrivers") || grants(n.Namespaced, "create", "storage.k8s.io", "csidrivers") {
		t.Errorf("CSIDriver is cluster-scoped: its rule belongs in Cluster only")
	}
	checkJustified(t, n)
}

// TestDiscoverOurCharts: nginx's optional kinds are found by their toggles,
// and nothing of ours needs a cluster-wide rule or a scope.
func TestDiscoverOurCharts(t *testing.T) {
	n, err := Discover(ourChart(t, "nginx"))
	if err != nil {
		t.Fatal(err)
	}
	for kind, found := range map[string]string{"apps/Deployment": "defaults", "/Service": "defaults", "/ConfigMap": "defaults", "/ServiceAccount": "defaults",
		"networking.k8s.io/Ingress": "values ingress.enabled=true", "autoscaling/HorizontalPodAutoscaler": "values autoscaling.enabled=true",
		"policy/PodDisruptionBudget": "values podDisruptionBudget.enabled=true"} {
		if k := kindOf(n, kind); k == nil || k.Found != found {
			t.Errorf("%s: %+v, want found by %q", kind, k, found)
		}
	}
	if len(n.Cluster) > 0 || len(n.Scope.ClusterScoped)+len(n.Scope.Namespaces) > 0 || len(n.Unresolved) > 0 {
		t.Errorf("nginx: cluster rules %v, scope %+v, unresolved %v", n.Cluster, n.Scope, n.Unresolved)
	}
	checkJustified(t, n)
}
