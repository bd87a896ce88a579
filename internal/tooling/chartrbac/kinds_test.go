package chartrbac

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"

	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestBuiltinTableMatchesTheAPIServer checks the table of Kubernetes' kinds
// against a real kube-apiserver's discovery, both ways: every entry is
// served with that resource name and scope, and every kind the server
// serves that can be created (kinds of CRDs aside) is an entry.
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
	// Kinds served by CRDs (the project's config/crd, and those other tests
	// of the package apply) are not Kubernetes' own.
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := testutil.Client(t, cfg).List(context.Background(), crds); err != nil {
		t.Fatal(err)
	}
	byCRD := map[string]bool{}
	for _, c := range crds.Items {
		byCRD[c.Spec.Group+"/"+c.Spec.Names.Kind] = true
	}
	served := map[string]apiKind{}
	for _, l := range lists {
		group, version, ok := strings.Cut(l.GroupVersion, "/")
		if !ok {
			group, version = "", l.GroupVersion
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "create") || byCRD[group+"/"+r.Kind] {
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
