package chartrbac

import (
	"reflect"
	"testing"
)

// TestDiscoverIsDeterministic: a chart whose one template makes several
// roles gets the same rules, in the same order, on every run, so that
// make chart run twice changes no byte of config/rbac (the objects of a
// render were read in the random order of a Go map).
func TestDiscoverIsDeterministic(t *testing.T) {
	role := func(name, resource string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {{ .Release.Name }}-" + name +
			"\nrules:\n- apiGroups: [\"\"]\n  resources: [" + resource + "]\n  verbs: [get]\n"
	}
	ch := syntheticChart(map[string]any{}, map[string]string{
		"templates/roles.yaml": role("a", "configmaps") + "---\n" + role("b", "services") + "---\n" + role("c", "pods") + "---\n" + role("d", "endpoints"),
	})
	first, err := Discover(ch)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		n, err := Discover(ch)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(n.Namespaced, first.Namespaced) || !reflect.DeepEqual(n.NamespacedWhy, first.NamespacedWhy) {
			t.Fatalf("two runs of Discover on the same chart differ:\n%v\n%v", first.Namespaced, n.Namespaced)
		}
	}
}
