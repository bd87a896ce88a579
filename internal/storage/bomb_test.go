package storage_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/storage"
	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// procStatus reads a field in kB ("VmHWM", "VmRSS") of /proc/<pid>/status,
// in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 3 && fs[0] == field+":" && fs[2] == "kB" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// waitReady waits for the resource's Ready=True.
func waitReady(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) {
	t.Helper()
	tu.Eventually(t, 5*time.Minute, ns+"/"+name+" Ready", func() (bool, string) {
		got, err := tu.Get(t, c, gvk, ns, name)
		if err != nil {
			return false, err.Error()
		}
		cond := tu.Condition(got, status.TypeReady)
		return cond != nil && cond.Status == metav1.ConditionTrue, tu.Describe(got)
	})
}

// The acceptance of issue 38's bounded decoding, on the real manager binary
// (a child process, so that its memory is its own): a tenant who may write
// Secrets in the namespace plants, under the labels of a resource's Helm
// records, a revision that decompresses to 1 GiB (chunked format: an index
// and one chunk, ~1 MiB of gzip), and one in Helm's format as large as one
// Secret allows (the 1 MiB Secret holds 768 KiB of gzip, ~760 MiB of JSON
// at deflate's ~1030 to 1) whose gzip trailer lies that it is 16 MiB. The
// operator's peak resident memory (VmHWM, reset before the bombs) stays
// within 100 MiB of its resident memory before them; it keeps running; a
// resource of each kind created meanwhile in the same namespace installs
// and becomes Ready; each bombed resource is Stalled=True
// ReleaseRecordInvalid naming its Secret, and Ready again once the Secret
// is deleted.
func TestARecordBombLeavesTheOperatorWithinBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the manager")
	}
	ctx := context.Background()
	dir := t.TempDir()
	manager := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", manager, ".")
	build.Dir = tu.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "record-bomb")
	watches := tu.WatchesFile(t, "- {group: web.helmapp.io, version: v1alpha1, kind: Echo, chart: helm-charts/echo, storage: chunked}\n"+
		"- {group: web.helmapp.io, version: v1alpha1, kind: Nginx, chart: helm-charts/nginx}\n")
	logPath := filepath.Join(dir, "operator.log")
	p, err := controlplane.StartProcess(controlplane.Command{Name: "the operator", Binary: manager, Dir: dir,
		Args: []string{"--watches-file=" + watches, "--metrics-bind-address=0", "--health-probe-bind-address=0"},
		Env:  []string{"KUBECONFIG=" + cp.KubeconfigPath, "WATCH_NAMESPACE=" + ns}, LogPath: logPath, KillWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = p.Stop(30 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("the operator's log:\n%s", b)
		}
	}()

	echo, nginx := tu.EchoGVK, tu.NginxGVK
	for _, r := range []struct {
		k    schema.GroupVersionKind
		name string
	}{{echo, "chunked"}, {nginx, "plain"}} {
		if err := c.Create(ctx, tu.NewCR(r.k, ns, r.name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, c, echo, ns, "chunked")
	waitReady(t, c, nginx, ns, "plain")

	// Before: what the operator holds once it has installed two releases;
	// its peak is counted from here (clear_refs 5 resets VmHWM).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.Pid()), []byte("5"), 0); err != nil {
		t.Logf("VmHWM not reset (%v): the peak counts from the start", err)
	}
	before := procStatus(t, p.Pid(), "VmRSS")
	defer func() {
		if t.Failed() && p.Exited() == nil {
			t.Logf("the operator's resident memory: %d MiB before the bombs, peak %d MiB since",
				before>>20, procStatus(t, p.Pid(), "VmHWM")>>20)
		}
	}()

	// The chunked bomb: 1 GiB of JSON, as revision 2 of Echo "chunked".
	sc := secretsClient(t, ns)
	z := gzipped(t, "chunked", 2, 1<<30)
	key := "sh.helm.release.v1.chunked.v2"
	var names []string
	for i, rest := 0, z[min(len(z), storage.ChunkSize):]; len(rest) > 0; i++ {
		n := min(len(rest), storage.ChunkSize)
		name := fmt.Sprintf("%s-bomb%d", key, i)
		names = append(names, name)
		if _, err := sc.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"owner": storage.ChunkedOwner, "key": key, "type": "chunk"}},
			Type:       "operatorframework.io/chunk.v1",
			Data:       map[string][]byte{"chunk": rest[:n]},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	extra := `["` + strings.Join(names, `","`) + `"]`
	if _, err := sc.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"owner": storage.ChunkedOwner, "type": "index",
			"name": "chunked", "status": "deployed", "version": "2", "key": key}},
		Type: "operatorframework.io/index.v1",
		Data: map[string][]byte{"chunk": z[:min(len(z), storage.ChunkSize)], "extraChunks": []byte(extra)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("chunked bomb: 1 GiB of JSON in %d KiB of gzip, an index and %d chunk(s)", len(z)>>10, len(names))

	// Helm's format: the largest one Secret holds, as revision 2 of Nginx
	// "plain".
	hz := gzipped(t, "plain", 2, 760<<20)
	// Its gzip trailer lies, stating the bound: the decoder's worst case
	// (it reads up to the bound, then measures past it).
	binary.LittleEndian.PutUint32(hz[len(hz)-4:], storage.MaxRecordSize)
	hkey := "sh.helm.release.v1.plain.v2"
	data := []byte(base64.StdEncoding.EncodeToString(hz))
	if len(data) > storage.SecretDataLimit {
		t.Fatalf("the Helm-format bomb is %d bytes, over a Secret's %d", len(data), storage.SecretDataLimit)
	}
	if _, err := sc.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: hkey, Labels: map[string]string{"owner": "helm",
			"name": "plain", "status": "deployed", "version": "2"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": data},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("Helm-format bomb: 760 MiB of JSON in %d KiB of base64 (the Secret's limit is 1024 KiB), stating 16 MiB", len(data)>>10)

	// Meanwhile, another resource of each kind installs.
	if err := c.Create(ctx, tu.NewCR(echo, ns, "other", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, tu.NewCR(nginx, ns, "other-nginx", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		k          schema.GroupVersionKind
		name, want string
	}{{echo, "chunked", ns + "/" + key + " decodes past 16 MiB"}, {nginx, "plain", ns + "/" + hkey + " decodes past 16 MiB"}} {
		u := tu.WaitForCondition(t, c, b.k, ns, b.name, status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseRecordInvalid)
		msg := tu.Condition(u, status.TypeStalled).Message
		if !strings.Contains(msg, b.want) {
			t.Errorf("%s: Stalled says %q, want it to name the record: %q", b.name, msg, b.want)
		}
		t.Logf("%s: Stalled=True ReleaseRecordInvalid %q", b.name, msg)
	}
	waitReady(t, c, echo, ns, "other")
	waitReady(t, c, nginx, ns, "other-nginx")

	if err := p.Exited(); err != nil {
		t.Fatalf("the operator exited: %v", err)
	}
	peak := procStatus(t, p.Pid(), "VmHWM")
	t.Logf("the operator's resident memory: %d MiB before the bombs, peak %d MiB after", before>>20, peak>>20)
	if peak-before > 100<<20 {
		t.Errorf("the operator's peak resident memory rose %d MiB over its %d MiB before the bombs, more than 100 MiB", (peak-before)>>20, before>>20)
	}

	// Deleting the forged records is what the message asks for: the
	// resources go on, woken by the deletion.
	for _, k := range append([]string{key, hkey}, names...) {
		if err := sc.Delete(ctx, k, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		k    schema.GroupVersionKind
		name string
	}{{echo, "chunked"}, {nginx, "plain"}} {
		tu.WaitForCondition(t, c, r.k, ns, r.name, status.TypeStalled, metav1.ConditionFalse, status.ReasonNotStalled)
		waitReady(t, c, r.k, ns, r.name)
	}
}
