package watches

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoadScope(t *testing.T) {
	ws, err := Load(write(t, `
- {group: g, version: v1, kind: A, chart: CHART}
- group: g
  version: v1
  kind: B
  chart: CHART
  scope:
    clusterScoped:
    - {group: rbac.authorization.k8s.io, kind: ClusterRole, names: ["{{release}}-*", "{{namespace}}-{{release}}"]}
    namespaces:
    - {group: monitoring.coreos.com, kind: ServiceMonitor, namespaces: [monitoring], names: ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ws[0].Scope, Scope{}) {
		t.Errorf("entry 1: scope %+v, want the release namespace only", ws[0].Scope)
	}
	want := Scope{
		ClusterScoped: []ScopeRule{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Names: []string{"{{release}}-*", "{{namespace}}-{{release}}"}}},
		Namespaces:    []ScopeRule{{Group: "monitoring.coreos.com", Kind: "ServiceMonitor", Namespaces: []string{"monitoring"}, Names: []string{"*"}}},
	}
	if !reflect.DeepEqual(ws[1].Scope, want) {
		t.Errorf("entry 2: scope %+v, want %+v", ws[1].Scope, want)
	}
}

func TestLoadBadScopeNamesEntryAndField(t *testing.T) {
	entry := "- {group: g, version: v1, kind: A, chart: CHART}\n- {group: g, version: v1, kind: B, chart: CHART, scope: %s}"
	for _, tt := range []struct{ name, scope, want string }{
		{"no kind", "{clusterScoped: [{group: rbac.authorization.k8s.io, names: ['*']}]}", "entry 2: (g/v1 B): field scope.clusterScoped[0].kind is required"},
		{"no names", "{clusterScoped: [{group: rbac.authorization.k8s.io, kind: ClusterRole}]}", "entry 2: (g/v1 B): field scope.clusterScoped[0].names is required"},
		{"an unknown placeholder", "{clusterScoped: [{kind: Namespace, names: ['{{name}}-*']}]}", `entry 2: (g/v1 B): field scope.clusterScoped[0].names: pattern "{{name}}-*" may use only the placeholders {{release}} and {{namespace}}`},
		{"a group with its version", "{clusterScoped: [{group: rbac.authorization.k8s.io/v1, kind: ClusterRole, names: ['*']}]}", "field scope.clusterScoped[0].group is an API group without its version"},
		{"namespaces on a cluster-scoped rule", "{clusterScoped: [{kind: Namespace, namespaces: [x], names: ['*']}]}", "field scope.clusterScoped[0].namespaces: a cluster-scoped object has no namespace"},
		{"a namespaced rule without namespaces", "{namespaces: [{kind: ConfigMap, names: ['*']}]}", "entry 2: (g/v1 B): field scope.namespaces[0].namespaces is required"},
		{"a namespace that cannot be one", "{namespaces: [{kind: ConfigMap, namespaces: [Kube_System], names: ['*']}]}", `field scope.namespaces[0].namespaces must name namespaces, got "Kube_System"`},
		{"an unknown field", "{clusterScoped: [{kind: ClusterRole, name: x, names: ['*']}]}", `entry 2: field scope: json: unknown field "name"`},
		{"an unknown scope field", "{cluster: []}", `entry 2: field scope: json: unknown field "cluster"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := write(t, strings.Replace(entry, "%s", tt.scope, 1))
			_, err := Load(p)
			if err == nil {
				t.Fatalf("Load accepted a bad scope")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
