package chartkit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/helmapp/helm-app-operator/internal/tooling/image"
)

// serveRepo serves dir as a chart repository whose index.yaml lists the
// given packaged charts, and returns its URL.
func serveRepo(t *testing.T, dir string, tgzs ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	idx := repo.NewIndexFile()
	for _, p := range tgzs {
		ch, err := loader.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if err := idx.MustAdd(ch.Metadata, filepath.Base(p), srv.URL, hex.EncodeToString(sum[:])); err != nil {
			t.Fatal(err)
		}
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL
}

// TestAddFromEachSource adds the same chart from a directory, a .tgz, an
// OCI registry (the project's loopback registry, plain HTTP) and a chart
// repository (httptest): each vendors it under helm-charts/app and writes
// the kind's files; adding it again changes no byte.
func TestAddFromEachSource(t *testing.T) {
	src := appChart(t, filepath.Join(t.TempDir(), "app"), "app", "0.1.0")
	pkgDir := t.TempDir()
	tgz := packageChart(t, src, pkgDir)

	reg, err := image.ServeRegistry("127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(data, reg.Host+"/charts/app:0.1.0"); err != nil {
		t.Fatalf("push the chart to the loopback registry: %v", err)
	}

	repoURL := serveRepo(t, pkgDir, tgz)

	for _, tc := range []struct {
		name string
		src  Source
	}{
		{"directory", Source{Chart: src}},
		{"tgz", Source{Chart: tgz}},
		{"oci", Source{Chart: "oci://" + reg.Host + "/charts/app", Version: "0.1.0", PlainHTTP: true}},
		{"repository", Source{Chart: repoURL, Name: "app", Version: "0.1.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyProject(t)
			rep := mustAdd(t, Options{Root: root, Source: tc.src, Kind: "App"})
			want := readTree(t, src)
			got := readTree(t, filepath.Join(root, "helm-charts", "app"))
			if tc.name != "directory" {
				// Packaging writes Chart.yaml anew (same fields).
				delete(want, "Chart.yaml")
				if ch, err := loader.Load(filepath.Join(root, "helm-charts", "app")); err != nil || ch.Metadata.Version != "0.1.0" {
					t.Errorf("the vendored chart does not load as app 0.1.0: %v", err)
				}
				delete(got, "Chart.yaml")
			}
			if d := treeDiff(want, got); len(d) > 0 {
				t.Errorf("vendored chart differs from the source: %v", d)
			}
			watches, _ := os.ReadFile(filepath.Join(root, "watches.yaml"))
			for _, s := range []string{"kind: App", "group: app.helmapp.io", "chart: helm-charts/app", "$RELATED_IMAGE_APP"} {
				if !strings.Contains(string(watches), s) {
					t.Errorf("watches.yaml lacks %q:\n%s", s, watches)
				}
			}
			manager, _ := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
			if !strings.Contains(string(manager), "- name: RELATED_IMAGE_APP\n          value: example.com/team/app:1.2.3\n") {
				t.Errorf("manager.yaml lacks RELATED_IMAGE_APP=example.com/team/app:1.2.3")
			}
			if len(rep.Changed) == 0 {
				t.Errorf("the first add reports no change")
			}

			before := readTree(t, root)
			rep = mustAdd(t, Options{Root: root, Source: tc.src, Kind: "App"})
			if d := treeDiff(before, readTree(t, root)); len(d) > 0 || len(rep.Changed) > 0 {
				t.Errorf("adding the same chart again changed %v (reported %v)", d, rep.Changed)
			}
		})
	}
}

// TestAddResolvesDependencies adds a chart whose Chart.yaml lists a
// dependency in a chart repository and one on disk (file://) that its
// charts/ lacks: both are vendored into helm-charts/<name>/charts, the
// vendored chart loads with every dependency, and adding it again changes
// nothing (Helm packs a file:// dependency and stamps Chart.lock anew each
// time; neither counts as a change).
func TestAddResolvesDependencies(t *testing.T) {
	work := t.TempDir()
	repoDir := filepath.Join(work, "repo")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dep := packageChart(t, appChart(t, filepath.Join(work, "app"), "app", "0.1.0"), repoDir)
	repoURL := serveRepo(t, repoDir, dep)
	writeChart(t, filepath.Join(work, "lib"), "apiVersion: v2\nname: lib\nversion: 0.2.0\n", "greeting: hi\n",
		map[string]string{"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\ndata:\n  greeting: {{ .Values.greeting }}\n"})
	meta := "apiVersion: v2\nname: stack\nversion: 1.0.0\ndependencies:\n" +
		"- name: app\n  version: 0.1.0\n  repository: " + repoURL + "\n" +
		"- name: lib\n  version: 0.2.0\n  repository: file://../lib\n"
	stack := writeChart(t, filepath.Join(work, "stack"), meta, "app:\n  replicaCount: 2\n", nil)

	root := copyProject(t)
	mustAdd(t, Options{Root: root, Source: Source{Chart: stack}, Kind: "Stack"})
	vendored := filepath.Join(root, "helm-charts", "stack")
	for _, f := range []string{"charts/app-0.1.0.tgz", "charts/lib-0.2.0.tgz"} {
		if _, err := os.Stat(filepath.Join(vendored, f)); err != nil {
			t.Errorf("dependency not vendored: %v", err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(vendored, "Chart.yaml")); string(got) != meta {
		t.Errorf("the vendored Chart.yaml differs from the source's:\n%s", got)
	}
	ch, err := loader.Load(vendored)
	if err != nil {
		t.Fatal(err)
	}
	if err := action.CheckDependencies(ch, ch.Metadata.Dependencies); err != nil {
		t.Errorf("the vendored chart lacks a dependency: %v", err)
	}
	// The dependency's image is mapped too, under its chart's values.
	watches, _ := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if !strings.Contains(string(watches), "app.image.repository:") {
		t.Errorf("the dependency's image is not mapped:\n%s", watches)
	}

	// A chart whose dependencies all come from a repository keeps the
	// Chart.lock Helm writes.
	web := writeChart(t, filepath.Join(work, "web"), "apiVersion: v2\nname: web\nversion: 1.0.0\ndependencies:\n"+
		"- name: app\n  version: 0.1.0\n  repository: "+repoURL+"\n", "{}\n", nil)
	mustAdd(t, Options{Root: root, Source: Source{Chart: web}, Kind: "Web"})
	lock := filepath.Join(root, "helm-charts", "web", "Chart.lock")
	data, err := os.ReadFile(lock)
	if err != nil {
		t.Fatalf("no Chart.lock vendored: %v", err)
	}

	// What an add made at another time: the packed file:// dependency with
	// other file times, the lock with another generated time. The same
	// dependencies must not count as a change.
	lib := filepath.Join(vendored, "charts", "lib-0.2.0.tgz")
	repack(t, lib, time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	old := regexp.MustCompile(`(?m)^generated: .*$`).ReplaceAll(data, []byte("generated: \"2001-02-03T04:05:06Z\""))
	if string(old) == string(data) {
		t.Fatalf("Chart.lock has no generated time:\n%s", data)
	}
	if err := os.WriteFile(lock, old, 0o644); err != nil {
		t.Fatal(err)
	}

	before := readTree(t, root)
	for _, o := range []Options{{Root: root, Source: Source{Chart: stack}, Kind: "Stack"}, {Root: root, Source: Source{Chart: web}, Kind: "Web"}} {
		if rep := mustAdd(t, o); len(rep.Changed) > 0 {
			t.Errorf("adding %s again reported %v", o.Kind, rep.Changed)
		}
	}
	if d := treeDiff(before, readTree(t, root)); len(d) > 0 {
		t.Errorf("adding the same charts again changed %v", d)
	}
}

// repack rewrites the .tgz at path with the same files stamped with mtime.
func repack(t *testing.T, path string, mtime time.Time) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files, err := tarFiles(data)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), ModTime: mtime, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("repacking %s changed no byte", path)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
