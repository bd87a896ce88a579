//go:build e2e

// The scratch project of the upstream chart tests: a copy of this
// repository in which `go run ./hack/chart add` makes a kind of a chart no
// one here wrote, and the roles it generated.

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// upstreamChart is a chart pinned in a Go module: `go mod download`
// fetches it once per machine into the module cache, as it does the
// control plane's sources.
type upstreamChart struct {
	module, version string
	// path is the chart's directory inside the module.
	path string
}

// The charts of issue 39.
var (
	sealedSecretsChart = upstreamChart{"github.com/bitnami-labs/sealed-secrets", "v0.32.2", "helm/sealed-secrets"}
	gatekeeperChart    = upstreamChart{"github.com/open-policy-agent/gatekeeper/v3", "v3.20.1", "charts/gatekeeper"}
	csiDriverChart     = upstreamChart{"sigs.k8s.io/secrets-store-csi-driver", "v1.5.4", "charts/secrets-store-csi-driver"}
)

// dir downloads the chart's module (a no-op once it is in the module cache)
// and returns the chart's directory there. The module cache is read-only:
// the command copies the chart into the project.
func (c upstreamChart) dir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", c.module+"@"+c.version)
	// Outside any module: the download must not touch a go.mod.
	cmd.Dir = t.TempDir()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s%s", c.module, c.version, err, out, stderr.String())
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s@%s printed no Dir (%v %s):\n%s", c.module, c.version, err, m.Error, out)
	}
	d := filepath.Join(m.Dir, filepath.FromSlash(c.path))
	if _, err := os.Stat(filepath.Join(d, "Chart.yaml")); err != nil {
		t.Fatalf("no chart in %s: %v", d, err)
	}
	return d
}

// project is a scratch copy of the repository, made an operator of one
// more chart by the command an operator author runs.
type project struct {
	t *testing.T
	// dir is the test's directory (kept after a failure), root the
	// project's copy in it.
	dir, root string
	// kind is the kind the chart became, gvr its resource, sample the file
	// of its sample resource.
	kind   string
	gvr    schema.GroupVersionResource
	sample string
}

// newProject copies the files git knows of the repository (tracked, and
// new ones not ignored: what a clone would have) into a directory of the
// test's own, kept after a failure with the suite's directory.
func newProject(t *testing.T) *project {
	t.Helper()
	dir := testDir(t)
	root := filepath.Join(dir, "project")
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = suite.root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(suite.root, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree, not yet in git
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return &project{t: t, dir: dir, root: root}
}

// run runs a command in the project's root (the Go build and module caches
// are the user's, shared with the suite) and returns its output.
func (p *project) run(name string, args ...string) string {
	p.t.Helper()
	start := time.Now()
	cmd := exec.Command(name, args...)
	cmd.Dir = p.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), p.root, err, out)
	}
	p.t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return string(out)
}

// addChart makes a kind of the chart in dir with the command (design:
// `go run ./hack/chart add --chart SRC --kind KIND --group GROUP`, and
// flags), logs its report, and finds the CRD and the sample it wrote.
func (p *project) addChart(dir, kind, group string, flags ...string) {
	p.t.Helper()
	args := append([]string{"run", "./hack/chart", "add", "--chart", dir, "--kind", kind, "--group", group}, flags...)
	report := p.run("go", args...)
	p.t.Logf("the command's report:\n%s", report)
	p.kind = kind
	p.findCRD()
	p.findSample()
}

// findCRD finds the CRD of p.kind the command wrote in config/crd/bases
// (as `make manifests` would).
func (p *project) findCRD() {
	p.t.Helper()
	files, _ := filepath.Glob(filepath.Join(p.root, "config", "crd", "bases", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			p.t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			p.t.Fatalf("%s: %v", f, err)
		}
		if crd.Spec.Names.Kind != p.kind {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				p.gvr = schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			}
		}
		return
	}
	p.t.Fatalf("the command wrote no CRD of kind %s in %s/config/crd/bases", p.kind, p.root)
}

// findSample finds the sample of p.kind among those config/samples'
// kustomization lists.
func (p *project) findSample() {
	p.t.Helper()
	dir := filepath.Join(p.root, "config", "samples")
	var k struct{ Resources []string }
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		p.t.Fatal(err)
	}
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			p.t.Fatalf("config/samples/kustomization.yaml lists %s: %v", r, err)
		}
		var head struct{ APIVersion, Kind string }
		if yaml.Unmarshal(b, &head) == nil && head.Kind == p.kind && head.APIVersion == p.gvr.GroupVersion().String() {
			p.sample = filepath.Join(dir, r)
			return
		}
	}
	p.t.Fatalf("config/samples/kustomization.yaml lists no sample of %s %s", p.gvr.GroupVersion(), p.kind)
}

// sampleName is the name of the sample resource.
func (p *project) sampleName() string {
	p.t.Helper()
	b, err := os.ReadFile(p.sample)
	if err != nil {
		p.t.Fatal(err)
	}
	var s struct {
		Metadata struct{ Name string }
	}
	if err := yaml.Unmarshal(b, &s); err != nil || s.Metadata.Name == "" {
		p.t.Fatalf("%s: no metadata.name (%v)", p.sample, err)
	}
	return s.Metadata.Name
}

// build builds the operator of the project and returns the binary's path.
func (p *project) build() string {
	p.t.Helper()
	bin := filepath.Join(p.root, "bin", "manager")
	p.run("go", "build", "-o", bin, ".")
	return bin
}

// managerEnv is the environment config/manager gives the manager's
// container, the variables with a literal value (the RELATED_IMAGE_*
// operand images, which watches.yaml's overrideValues pass to the charts),
// as `make deploy` would run it.
func (p *project) managerEnv() []string {
	p.t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(p.root, "config", "manager"))
	if err != nil {
		p.t.Fatalf("kustomize build config/manager: %v", err)
	}
	var env []string
	for _, r := range res.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		b, err := r.AsYAML()
		if err != nil {
			p.t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(b, &d); err != nil {
			p.t.Fatal(err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					env = append(env, e.Name+"="+e.Value)
				}
			}
		}
	}
	return env
}

// Names of the generated manager roles (config/rbac).
const (
	managerRole        = "manager-role"
	managerClusterRole = "manager-cluster-role"
)

// generatedRoles builds config/rbac with kustomize, as `make deploy` and
// `make bundle` do, and returns the rules of the manager's two roles: the
// namespaced role and the cluster role (none when the project has none).
func (p *project) generatedRoles() (namespaced, cluster []rbacv1.PolicyRule) {
	p.t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(p.root, "config", "rbac"))
	if err != nil {
		p.t.Fatalf("kustomize build config/rbac: %v", err)
	}
	found := false
	for _, r := range res.Resources() {
		if r.GetKind() != "ClusterRole" {
			continue
		}
		b, err := r.AsYAML()
		if err != nil {
			p.t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(b, &role); err != nil {
			p.t.Fatal(err)
		}
		switch role.Name {
		case managerRole:
			namespaced, found = role.Rules, true
		case managerClusterRole:
			cluster = role.Rules
		}
	}
	if !found {
		p.t.Fatalf("kustomize build config/rbac has no ClusterRole %s", managerRole)
	}
	return namespaced, cluster
}

// withoutResource returns rules with every grant on resource of group
// removed: a rule naming only that resource is dropped, one naming others
// too keeps them.
func withoutResource(rules []rbacv1.PolicyRule, group, resource string) ([]rbacv1.PolicyRule, error) {
	var out []rbacv1.PolicyRule
	removed := false
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) {
			out = append(out, r)
			continue
		}
		removed = true
		if len(r.APIGroups) > 1 {
			// Keep the other groups' grants whole.
			other := *r.DeepCopy()
			other.APIGroups = slices.DeleteFunc(other.APIGroups, func(g string) bool { return g == group })
			out = append(out, other)
		}
		if rest := slices.DeleteFunc(slices.Clone(r.Resources), func(x string) bool { return x == resource }); len(rest) > 0 {
			mine := *r.DeepCopy()
			mine.APIGroups, mine.Resources = []string{group}, rest
			out = append(out, mine)
		}
	}
	if !removed {
		return nil, fmt.Errorf("no rule grants %s of group %q", resource, group)
	}
	return out, nil
}
