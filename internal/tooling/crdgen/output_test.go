package crdgen

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
)

func TestGenerateIsDeterministic(t *testing.T) {
	gen := func() []File {
		// Load afresh each time so no state is shared between the runs.
		files, err := Generate([]watches.Watch{
			loadWatch(t, "Nginx", "../../../helm-charts/nginx"),
			loadWatch(t, "Echo", "../../../helm-charts/echo"),
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	first := gen()
	for i := 0; i < 5; i++ {
		if !reflect.DeepEqual(first, gen()) {
			t.Fatal("two runs gave different output")
		}
	}
	if len(first) != 2 || first[0].Name != "web.helmapp.io_echoes.yaml" || first[1].Name != "web.helmapp.io_nginxes.yaml" {
		t.Fatalf("files = %v %v", first[0].Name, first[1].Name)
	}
	for _, f := range first {
		if !bytes.HasPrefix(f.Data, []byte(Header+"---\n")) ||
			bytes.Contains(f.Data, []byte("creationTimestamp: null")) || bytes.Contains(f.Data, []byte("\nstatus:\n  acceptedNames")) {
			t.Errorf("%s:\n%s", f.Name, f.Data[:300])
		}
	}
}

func TestGenerateRejectsDuplicateCRD(t *testing.T) {
	w := loadWatch(t, "Echo", "../../../helm-charts/echo")
	w2 := w
	w2.Version = "v1beta1"
	if _, err := Generate([]watches.Watch{w, w2}); err == nil {
		t.Fatal("two versions of one kind were accepted")
	}
}

func TestSync(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "bases")
	files := []File{{Name: "a_bs.yaml", Data: []byte(Header + "a\n")}, {Name: "c_ds.yaml", Data: []byte(Header + "c\n")}}
	p := func(name string) string { return filepath.Join(out, name) }

	// A missing directory: everything would change, nothing is written on check.
	changed, err := Sync(out, files, true)
	if err != nil || !reflect.DeepEqual(changed, []string{p("a_bs.yaml"), p("c_ds.yaml")}) {
		t.Fatalf("check = %v, %v", changed, err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("check wrote the directory")
	}

	if changed, err = Sync(out, files, false); err != nil || len(changed) != 2 {
		t.Fatalf("write = %v, %v", changed, err)
	}
	if changed, err = Sync(out, files, true); err != nil || len(changed) != 0 {
		t.Fatalf("check after write = %v, %v", changed, err)
	}

	// An edited file, a stale generated file, and a hand-written file.
	write := func(name, data string) {
		if err := os.WriteFile(p(name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a_bs.yaml", Header+"edited\n")
	write("old_gone.yaml", Header+"old\n")
	write("kustomization.yaml", "resources: []\n")
	want := []string{p("a_bs.yaml"), p("old_gone.yaml")}
	if changed, err = Sync(out, files, true); err != nil || !reflect.DeepEqual(changed, want) {
		t.Fatalf("check = %v, %v; want %v", changed, err, want)
	}
	if changed, err = Sync(out, files, false); err != nil || !reflect.DeepEqual(changed, want) {
		t.Fatalf("write = %v, %v; want %v", changed, err, want)
	}
	if _, err := os.Stat(p("old_gone.yaml")); !os.IsNotExist(err) {
		t.Error("stale generated file was kept")
	}
	if data, err := os.ReadFile(p("kustomization.yaml")); err != nil || string(data) != "resources: []\n" {
		t.Error("a file gencrd did not generate was touched")
	}
	if changed, err = Sync(out, files, true); err != nil || len(changed) != 0 {
		t.Fatalf("check after write = %v, %v", changed, err)
	}
}

// TestGeneratedCRDsAreUpToDate fails when config/crd/bases differs from what
// watches.yaml and the charts generate.
func TestGeneratedCRDsAreUpToDate(t *testing.T) {
	t.Chdir("../../..") // chart paths in watches.yaml are relative to the repository root
	ws, err := watches.Load("watches.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(ws)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := Sync("config/crd/bases", files, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) > 0 {
		t.Fatalf("stale CRDs %v; run: go run ./hack/gencrd", changed)
	}
}
