package chartrbac

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
)

// TestBuiltinTableMatchesTheAPIServer checks the table of Kubernetes' kinds
// against a real kube-apiserver's discovery, both ways: every entry is
// served with that resource name and scope, and every kind the server
// serves that can be created (the project's own CRDs aside) is an entry.
// A Kubernetes upgrade that adds, drops or moves a kind fails here.
func TestBuiltinTableMatchesTheAPIServer(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != BuiltinKubeVersion {
		t.Errorf("the API server is %s, the table says %s: update BuiltinKubeVersion (and the table, if this test says so)", info.GitVersion, BuiltinKubeVersion)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]apiKind{}
	for _, l := range lists {
		group, version, ok := strings.Cut(l.GroupVersion, "/")
		if !ok {
			group, version = "", l.GroupVersion
		}
		if group == "web.helmapp.io" {
			continue // the project's own CRDs (config/crd), not Kubernetes'
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "create") {
				continue
			}
			served[gvkKey(group, version, r.Kind)] = apiKind{Group: group, Version: version, Kind: r.Kind, Resource: r.Name, Namespaced: r.Namespaced}
		}
	}
	inTable := map[string]bool{}
	for _, k := range builtinKinds {
		key := gvkKey(k.Group, k.Version, k.Kind)
		if inTable[key] {
			t.Errorf("%s is in the table twice", key)
		}
		inTable[key] = true
		s, ok := served[key]
		switch {
		case !ok:
			t.Errorf("the table lists %s, which the API server does not serve", key)
		case s != k:
			t.Errorf("the table says %+v, the API server %+v", k, s)
		}
	}
	for key, s := range served {
		if !inTable[key] {
			t.Errorf("the API server serves %s, which the table lacks: add %s", key, fmt.Sprintf("{%q, %q, %q, %q, %v}", s.Group, s.Version, s.Kind, s.Resource, s.Namespaced))
		}
	}
	if len(builtinKinds) < 50 {
		t.Errorf("only %d kinds in the table", len(builtinKinds))
	}
}
