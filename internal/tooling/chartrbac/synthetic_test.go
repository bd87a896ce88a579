package chartrbac

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// syntheticChart makes a chart of templates (name -> text) and values.
func syntheticChart(values map[string]any, templates map[string]string) *chart.Chart {
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "synth", Version: "0.1.0", APIVersion: "v2"}, Values: values}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range templates {
			if !yield(k) {
				return
			}
		}
	}) {
		ch.Templates = append(ch.Templates, &chart.File{Name: name, Data: []byte(templates[name])})
	}
	return ch
}

// TestDiscoverWhatRealChartsDo covers what the three real charts do not:
// an object in another namespace (its rule cluster-wide, its scope entry),
// names made from the release's namespace, a Namespace, the items of a
// List, a kind behind a .Capabilities probe of an API outside Kubernetes, a
// toggle that fails to render (skipped with a note), a binding to a role the
// chart does not create (bind on that name alone), and a kind whose
// apiVersion is not literal.
func TestDiscoverWhatRealChartsDo(t *testing.T) {
	ch := syntheticChart(map[string]any{
		"monitor":  map[string]any{"enabled": false},
		"broken":   false,
		"kindName": "ConfigMap",
		"extra":    map[string]any{"enabled": nil},
	}, map[string]string{
		"templates/elsewhere.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  namespace: kube-system
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .Release.Namespace }}-workers
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .Release.Namespace }}-{{ .Release.Name }}-delegator
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:auth-delegator
subjects:
- kind: ServiceAccount
  name: default
  namespace: {{ .Release.Namespace }}
`,
		"templates/list.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: {{ .Release.Name }}
  spec:
    ports: [{port: 80}]
`,
		"templates/monitor.yaml": `{{- if and .Values.monitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .Release.Name }}
{{- end }}
`,
		"templates/lookups.yaml": `{{- $own := lookup "v1" "Secret" .Release.Namespace "seed" }}
{{- $all := lookup "apps/v1" "Deployment" "" "" }}
{{- $any := lookup "v1" .Values.kindName "x" "y" }}`,
		"templates/broken.yaml": `{{- if .Values.broken }}{{ fail "broken needs a name" }}{{ end }}`,
		"templates/extra.yaml": `{{- if .Values.extra.enabled }}
apiVersion: {{ include "pdb.apiVersion" . }}
kind: PodDisruptionBudget
metadata:
  name: {{ .Release.Name }}
{{- end }}
{{- define "pdb.apiVersion" }}policy/v1{{ end }}
`,
		"templates/tls.yaml": `{{- if .Values.tls }}
apiVersion: {{ .Values.tls.apiVersion }}
kind: CertificateSigningRequest
metadata:
  name: {{ .Release.Name }}
{{- end }}
`,
	})
	n, err := Discover(ch)
	if err != nil {
		t.Fatal(err)
	}
	// The ConfigMap of kube-system: a cluster-wide rule, a scope entry.
	if !grants(n.Cluster, "create", "", "configmaps") || grants(n.Namespaced, "create", "", "configmaps") {
		t.Errorf("the ConfigMap in kube-system: cluster rules %v, namespaced %v", n.Cluster, n.Namespaced)
	}
	wantNS := watches.ScopeRule{Group: "", Kind: "ConfigMap", Namespaces: []string{"kube-system"}, Names: []string{"{{release}}-settings"}}
	if !slices.ContainsFunc(n.Scope.Namespaces, func(r watches.ScopeRule) bool {
		return r.Kind == wantNS.Kind && slices.Equal(r.Namespaces, wantNS.Namespaces) && slices.Equal(r.Names, wantNS.Names)
	}) {
		t.Errorf("scope.namespaces %+v, want %+v", n.Scope.Namespaces, wantNS)
	}
	if !hasScope(n.Scope.ClusterScoped, "", "Namespace", "{{namespace}}-workers") ||
		!hasScope(n.Scope.ClusterScoped, "rbac.authorization.k8s.io", "ClusterRoleBinding", "{{namespace}}-{{release}}-delegator") {
		t.Errorf("scope.clusterScoped %+v", n.Scope.ClusterScoped)
	}
	// Only the ConfigMap of kube-system is shared by every install.
	if !slices.ContainsFunc(n.Notes, func(s string) bool {
		return strings.Contains(s, "AllNamespaces") && strings.Contains(s, "ConfigMap {{release}}-settings") && !strings.Contains(s, "workers")
	}) {
		t.Errorf("notes %v: want the install mode named for the ConfigMap alone", n.Notes)
	}
	// The List's Service is a kind the chart creates.
	if k := kindOf(n, "/Service"); k == nil || !slices.Contains(k.Templates, "templates/list.yaml") {
		t.Errorf("the List's Service: %+v", k)
	}
	// The probe of monitoring.coreos.com/v1 is answered yes: ServiceMonitor
	// renders, and is unresolved (no CRD of the chart defines it).
	if k := kindOf(n, "monitoring.coreos.com/ServiceMonitor"); k == nil || k.Found != "values monitor.enabled=true" || k.Resource != "" {
		t.Errorf("ServiceMonitor: %+v", k)
	}
	if !slices.ContainsFunc(n.Unresolved, func(s string) bool {
		return strings.HasPrefix(s, "templates/monitor.yaml: ServiceMonitor monitoring.coreos.com/v1")
	}) {
		t.Errorf("unresolved %v", n.Unresolved)
	}
	if !slices.ContainsFunc(n.Notes, func(s string) bool {
		return strings.Contains(s, "values broken=true does not render") && strings.Contains(s, "broken needs a name")
	}) {
		t.Errorf("no note on the toggle that does not render: %v", n.Notes)
	}
	if k := kindOf(n, "policy/PodDisruptionBudget"); k == nil || k.Found != "values extra.enabled=true" {
		t.Errorf("PodDisruptionBudget behind an unset enabled flag: %+v", k)
	}
	// CertificateSigningRequest: no render makes it, its apiVersion is not
	// literal, and one group serves it: found in the template's text.
	if k := kindOf(n, "certificates.k8s.io/CertificateSigningRequest"); k == nil || k.Found != "template text" || k.Namespaced {
		t.Errorf("CertificateSigningRequest: %+v", k)
	}
	bind := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"system:auth-delegator"}}
	if !slices.ContainsFunc(n.Cluster, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.Verbs, bind.Verbs) && slices.Equal(r.ResourceNames, bind.ResourceNames) && slices.Equal(r.Resources, bind.Resources)
	}) {
		t.Errorf("no bind on system:auth-delegator alone: %v", n.Cluster)
	}
	// Lookups: get on one Secret of the release's namespace; list of
	// Deployments everywhere; a lookup with a templated kind is unresolved.
	if !slices.ContainsFunc(n.Namespaced, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.Resources, []string{"secrets"}) && slices.Equal(r.Verbs, []string{"get"}) && slices.Equal(r.ResourceNames, []string{"seed"})
	}) {
		t.Errorf("no get on Secret seed in the release's namespace: %v", n.Namespaced)
	}
	if !grants(n.Cluster, "list", "apps", "deployments") || grants(n.Cluster, "create", "apps", "deployments") {
		t.Errorf("the lookup of every Deployment: want list cluster-wide and nothing more, got %v", n.Cluster)
	}
	if !slices.ContainsFunc(n.Unresolved, func(s string) bool {
		return strings.HasPrefix(s, "templates/lookups.yaml: a lookup whose arguments are not literal")
	}) {
		t.Errorf("no unresolved line for the templated lookup: %v", n.Unresolved)
	}
	checkJustified(t, n)
}

// TestDiscoverChartNeedingAValue: a chart that renders only with a value
// set is no failure: its kinds come from its templates' text, with a note.
func TestDiscoverChartNeedingAValue(t *testing.T) {
	n, err := Discover(syntheticChart(nil, map[string]string{"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ required "set domain" .Values.domain }}
`}))
	if err != nil {
		t.Fatal(err)
	}
	if k := kindOf(n, "/ConfigMap"); k == nil || k.Found != "template text" || !grants(n.Namespaced, "create", "", "configmaps") {
		t.Errorf("ConfigMap: %+v, rules %v", k, n.Namespaced)
	}
	if !slices.ContainsFunc(n.Notes, func(s string) bool {
		return strings.Contains(s, "does not render with its default values") && strings.Contains(s, "set domain")
	}) {
		t.Errorf("notes %v", n.Notes)
	}
}
