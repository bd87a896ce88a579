package chartkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// TestAddShipsChartCRDsWithTheOperator adds sealed-secrets with CRDS=bundle:
// its crds/ CRD is copied into config/crd/charts/<kind> and listed by
// config/crd's kustomization, the watch skips crds/, the operator's roles
// grant nothing on CRDs, and the bundle carries the CRD as an owned CRD and
// validates with 0 errors and 0 warnings (with the chart's crds/ applied by
// the operator the validators warn about creating CRDs). Adding again
// without the flag keeps the choice and changes nothing; CRDS=operator
// switches back; removing the kind gives the project back byte for byte.
func TestAddShipsChartCRDsWithTheOperator(t *testing.T) {
	c := realCharts[0] // sealed-secrets: one CRD in crds/
	root := copyProject(t)
	main := readTree(t, root)
	o := Options{Root: root, Source: Source{Chart: filepath.Join(moduleDir(t, c.module), c.dir)}, Kind: c.kind, Group: c.group, CRDs: CRDsBundle}
	rep := mustAdd(t, o)
	k := rep.Names

	const crdName = "sealedsecrets.bitnami.com"
	if len(rep.BundledCRDs) != 1 || rep.BundledCRDs[0] != crdName {
		t.Errorf("bundled CRDs %v, want [%s]", rep.BundledCRDs, crdName)
	}
	entry := filepath.ToSlash(filepath.Join(k.chartCRDsEntry(), crdName+".yaml"))
	if _, err := os.Stat(filepath.Join(root, "config", "crd", filepath.FromSlash(entry))); err != nil {
		t.Errorf("the chart's CRD file: %v", err)
	}
	if kust := read(t, root, "config/crd/kustomization.yaml"); !strings.Contains(kust, "- "+entry+"\n") {
		t.Errorf("config/crd/kustomization.yaml does not list %s:\n%s", entry, kust)
	}
	var ws []struct {
		Kind string
		CRDs *struct{ Install string } `json:"crds"`
	}
	if err := sigsyaml.Unmarshal([]byte(read(t, root, "watches.yaml")), &ws); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Kind == k.Kind && (w.CRDs == nil || w.CRDs.Install != "Skip") {
			t.Errorf("the watch of %s does not skip crds/: %+v", k.Kind, w.CRDs)
		}
	}
	for _, f := range []string{"config/rbac/role.yaml", "config/rbac/cluster_role.yaml"} {
		if strings.Contains(read(t, root, f), "customresourcedefinitions") {
			t.Errorf("%s grants a right on CRDs, which ship with the operator", f)
		}
	}

	files, err := bundle.Generate(bundle.Options{Root: root, Version: "0.1.0", Image: "example.com/helm-app-operator:0.1.0", Channels: []string{"candidate"}, CreatedAt: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := files.Write(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, bundle.ManifestsDir, "bitnami.com_sealedsecrets.yaml")); err != nil {
		t.Errorf("the bundle does not carry the chart's CRD: %v", err)
	}
	r, err := bundle.Validate(filepath.Join(root, bundle.BundleDir), bundle.DefaultK8sVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 || len(r.Warnings) > 0 {
		t.Errorf("make bundle: errors %v, warnings %v; want none", r.Errors, r.Warnings)
	}
	// The generated bundle is not part of what the command owns.
	for _, p := range []string{bundle.BundleDir, bundle.DockerfilePath} {
		if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	restoreBundle(t, root, main)

	added := readTree(t, root)
	o.CRDs = ""
	if rep := mustAdd(t, o); len(rep.Changed) > 0 {
		t.Errorf("adding again without CRDS reports %v", rep.Changed)
	}
	if d := treeDiff(added, readTree(t, root)); len(d) > 0 {
		t.Errorf("adding again without CRDS changed %v", d)
	}

	o.CRDs = CRDsOperator
	mustAdd(t, o)
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(k.chartCRDsDir()))); !os.IsNotExist(err) {
		t.Errorf("CRDS=operator left %s: %v", k.chartCRDsDir(), err)
	}
	if strings.Contains(read(t, root, "watches.yaml"), "install: Skip") {
		t.Errorf("CRDS=operator left crds.install: Skip in watches.yaml")
	}
	if !strings.Contains(read(t, root, "config/rbac/cluster_role.yaml"), "customresourcedefinitions") {
		t.Errorf("CRDS=operator: the operator has no rule to apply the chart's crds/")
	}
	if strings.Contains(read(t, root, "config/manifests/bases/helm-app-operator.clusterserviceversion.yaml"), crdName) {
		t.Errorf("CRDS=operator left %s an owned CRD of the CSV", crdName)
	}

	o.CRDs = CRDsBundle
	mustAdd(t, o)
	if _, err := Remove(root, k.Kind); err != nil {
		t.Fatal(err)
	}
	if d := treeDiff(main, readTree(t, root)); len(d) > 0 {
		t.Errorf("removing the kind left %v", d)
	}
}

// read returns a file of the project at root.
func read(t *testing.T, root, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// restoreBundle puts main's bundle/ back after a test generated its own.
func restoreBundle(t *testing.T, root string, main map[string][]byte) {
	t.Helper()
	for p, data := range main {
		if !strings.HasPrefix(p, bundle.BundleDir+"/") && p != bundle.DockerfilePath {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
