package chartkit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// repoRoot is the project's root, from this package's directory.
const repoRoot = "../../.."

// copyProject copies the project's tracked files (git ls-files) into a new
// temporary directory and returns it: a scratch project to add kinds to.
func copyProject(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readTree reads every file under dir, by slash path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeDiff lists the files that differ between two trees.
func treeDiff(a, b map[string][]byte) []string {
	var out []string
	for p, x := range a {
		if y, ok := b[p]; !ok {
			out = append(out, "only before: "+p)
		} else if !bytes.Equal(x, y) {
			out = append(out, "differs: "+p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, "only after: "+p)
		}
	}
	sort.Strings(out)
	return out
}

// mustAdd adds a kind and fails the test on error.
func mustAdd(t *testing.T, o Options) *Report {
	t.Helper()
	rep, err := Add(o)
	if err != nil {
		t.Fatalf("add %s from %s: %v", o.Kind, o.Chart, err)
	}
	return rep
}

// writeChart writes a chart directory: Chart.yaml from meta (YAML lines),
// values.yaml, and templates by name.
func writeChart(t *testing.T, dir, meta, values string, templates map[string]string) string {
	t.Helper()
	files := map[string]string{"Chart.yaml": meta, "values.yaml": values}
	for n, s := range templates {
		files["templates/"+n] = s
	}
	for n, s := range files {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// packageChart packages the chart directory dir into outDir and returns the
// .tgz's path.
func packageChart(t *testing.T, dir, outDir string) string {
	t.Helper()
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := chartutil.Save(ch, outDir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// appChart is a small chart of one Deployment whose image is
// image.repository:image.tag (the tag defaulting to appVersion).
func appChart(t *testing.T, dir, name, version string) string {
	t.Helper()
	return writeChart(t, dir,
		"apiVersion: v2\nname: "+name+"\nversion: "+version+"\nappVersion: \"1.2.3\"\ndescription: A test application.\n",
		"replicaCount: 1\nimage:\n  repository: example.com/team/app\n  tag: \"\"\n",
		map[string]string{"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
      - name: app
        image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
`})
}
