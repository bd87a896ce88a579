package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBadWatchesFileStopsStart runs the real binary with a broken watches
// file: it must exit non-zero with one line naming the entry and the field.
// Bad client rate limits (--kube-api-qps, --kube-api-burst) stop it the same
// way, with one line naming the flag.
func TestBadWatchesFileStopsStart(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		name, content string
		want          []string
	}{
		{"field of our pass", `
- group: web.helmapp.io
  version: v1alpha1
  kind: Nginx
  chart: helm-charts/nginx
- group: web.helmapp.io
  version: v1alpha1
  kind: Echo
  chart: helm-charts/echo
  reconcilePeriod: sometimes
`, []string{"entry 2", "field reconcilePeriod: time: invalid duration"}},
		// overrideValues are expanded by helm-operator-plugins' loader and
		// set by the reconciler: a bad one stops start-up all the same.
		{"overrideValues", `
- group: web.helmapp.io
  version: v1alpha1
  kind: Nginx
  chart: helm-charts/nginx
  overrideValues:
    image.tag: '{{ fail "set HELMAPP_TAG" }}'
`, []string{"entry 1", `field overrideValues: key "image.tag": its template fails`, "set HELMAPP_TAG"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			watches := filepath.Join(t.TempDir(), "watches.yaml")
			if err := os.WriteFile(watches, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "--watches-file", watches, "--metrics-bind-address=0", "--health-probe-bind-address=0")
			// No kubeconfig: the watches file must be judged before any cluster is needed.
			cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the operator started with a bad watches file:\n%s", out)
			}
			msg := strings.TrimSpace(string(out))
			for _, want := range append([]string{"error: watches file", watches}, tt.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("start-up error %q does not contain %q", msg, want)
				}
			}
			if strings.Count(msg, "\n") != 0 {
				t.Errorf("start-up error is not one line:\n%s", msg)
			}
		})
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"negative QPS", []string{"--kube-api-qps=-5", "--kube-api-burst=10"}, "--kube-api-qps must be positive, or 0 for no client-side limit; got -5"},
		{"QPS without burst", []string{"--kube-api-qps=50", "--kube-api-burst=0"}, "--kube-api-qps 50 needs a positive --kube-api-burst"},
		{"burst without QPS", []string{"--kube-api-qps=0", "--kube-api-burst=100"}, "--kube-api-burst 100 needs --kube-api-qps"},
		{"negative burst", []string{"--kube-api-qps=50", "--kube-api-burst=-1"}, "--kube-api-burst must be positive; got -1"},
		{"NaN", []string{"--kube-api-qps=NaN", "--kube-api-burst=1"}, "--kube-api-qps must be a number; got NaN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--watches-file", "watches.yaml", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, tt.args...)
			cmd := exec.Command(bin, args...)
			// No kubeconfig: the flags must be judged before any cluster is needed.
			cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the operator started with %v:\n%s", tt.args, out)
			}
			msg := strings.TrimSpace(string(out))
			if want := "error: " + tt.want; !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") {
				t.Errorf("start-up error %q, want one line starting with %q", msg, want)
			}
		})
	}
}

// TestStartLogShowsCollectorSettings runs the real binary: its start-up log
// says what the garbage collector runs with, Go's own target (GOGC=100)
// unless GOGC is set, and GOMEMLIMIT as set or as derived from the
// container's memory limit (memlimit.go).
func TestStartLogShowsCollectorSettings(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	derived := "none"
	if l := defaultMemoryLimit(cgroupMemoryFiles); l > 0 {
		derived = strconv.FormatInt(l, 10)
	}
	for _, tt := range []struct {
		name                string
		env                 []string
		wantGOGC, wantLimit string
	}{
		{"defaults", nil, "100", derived},
		{"GOGC and GOMEMLIMIT set", []string{"GOGC=50", "GOMEMLIMIT=1GiB"}, "50", "1073741824"},
		{"GOGC off", []string{"GOGC=off"}, "off", derived},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, "--watches-file", "watches.yaml", "--metrics-bind-address=0", "--health-probe-bind-address=0")
			// No cluster: the operator logs its settings, then stops for want of one.
			env := []string{"KUBECONFIG=/nonexistent", "HOME=" + t.TempDir()}
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != "GOGC" && k != "GOMEMLIMIT" && k != "KUBECONFIG" && k != "HOME" &&
					k != "KUBERNETES_SERVICE_HOST" && k != "KUBERNETES_SERVICE_PORT" {
					env = append(env, kv)
				}
			}
			cmd.Env = append(env, tt.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the operator started without a cluster:\n%s", out)
			}
			var found bool
			for _, line := range strings.Split(string(out), "\n") {
				var entry map[string]any
				if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] != "Garbage collector" {
					continue
				}
				found = true
				if entry["GOGC"] != tt.wantGOGC || entry["GOMEMLIMIT"] != tt.wantLimit {
					t.Errorf("logged GOGC %v, GOMEMLIMIT %v; want %s, %s", entry["GOGC"], entry["GOMEMLIMIT"], tt.wantGOGC, tt.wantLimit)
				}
			}
			if !found {
				t.Errorf("no start-up log line on the garbage collector in:\n%s", out)
			}
		})
	}
}
