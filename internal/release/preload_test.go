package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// helmWritten is the Secret Helm's Secrets driver writes for rel (what it
// hands its client's Create), at resourceVersion rv.
func helmWritten(t *testing.T, rel *release.Release, rv string) *corev1.Secret {
	t.Helper()
	w := &capturingSecrets{}
	key := "sh.helm.release.v1." + rel.Name + ".v" + strconv.Itoa(rel.Version)
	if err := driver.NewSecrets(w).Create(key, rel); err != nil {
		t.Fatal(err)
	}
	w.s.ResourceVersion = rv
	return w.s
}

type capturingSecrets struct {
	corev1client.SecretInterface
	s *corev1.Secret
}

func (c *capturingSecrets) Create(_ context.Context, s *corev1.Secret, _ metav1.CreateOptions) (*corev1.Secret, error) {
	c.s = s
	return s, nil
}

func deployedRelease(name string, version int) *release.Release {
	return &release.Release{Name: name, Namespace: "ns", Version: version,
		Info:     &release.Info{Status: release.StatusDeployed, Description: "Install complete"},
		Chart:    &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1.0.0"}, Templates: []*chart.File{{Name: "t", Data: []byte("x")}}},
		Config:   map[string]any{"a": "b"},
		Manifest: "kind: ConfigMap\n",
		Labels:   map[string]string{LabelChartDigest: "d"},
	}
}

// Concurrent first misses in a namespace wait for one list; each finds its
// revision as Helm's driver would return it from a Get, trimmed as the memo
// trims; a Secret at another resourceVersion, or a release the list did not
// find, is not answered, and lists nothing more.
func TestPreloadListsANamespaceOnceForConcurrentMisses(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	var secrets []*corev1.Secret
	for _, n := range names {
		secrets = append(secrets, helmWritten(t, deployedRelease(n, 1), "rv-"+n))
	}
	var calls atomic.Int32
	unblock := make(chan struct{})
	m := NewPreloadingMemo(func(_ context.Context, ns string, add func(*corev1.Secret)) error {
		calls.Add(1)
		<-unblock
		for _, s := range secrets {
			add(s)
		}
		return nil
	}, nil)

	var wg sync.WaitGroup
	got := make([]*release.Release, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = m.get("ns", n, "sh.helm.release.v1."+n+".v1", "rv-"+n, true)
		}()
	}
	close(unblock)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d lists for concurrent first misses in one namespace, want 1", n)
	}
	for i, n := range names {
		want, err := driver.NewSecrets(listedSecret{s: secrets[i]}).Get(secrets[i].Name)
		if err != nil {
			t.Fatal(err)
		}
		r := got[i]
		switch {
		case r == nil:
			t.Errorf("%s: not answered from the list", n)
		case r.Version != 1 || r.Info.Status != want.Info.Status || r.Manifest != want.Manifest ||
			r.Config["a"] != "b" || r.Chart.Metadata.Name != "c" || len(r.Chart.Templates) != 0:
			t.Errorf("%s: got %+v, want Helm's Get trimmed", n, r)
		case len(r.Labels) != len(want.Labels) || r.Labels[LabelChartDigest] != "d" || r.Labels["owner"] != "":
			t.Errorf("%s: labels %v, want Helm's Get's %v", n, r.Labels, want.Labels)
		}
	}
	// Once taken, the memo holds it.
	if r := m.get("ns", "a", "sh.helm.release.v1.a.v1", "rv-a", false); r == nil {
		t.Error("a revision taken from the list is not the memo's")
	}
	// Another resourceVersion of b's record (written after the list): nothing.
	m2 := NewPreloadingMemo(func(_ context.Context, _ string, add func(*corev1.Secret)) error {
		calls.Add(1)
		for _, s := range secrets {
			add(s)
		}
		return nil
	}, nil)
	if r := m2.get("ns", "b", "sh.helm.release.v1.b.v1", "rv-newer", true); r != nil {
		t.Error("answered a record at a resourceVersion the list did not see")
	}
	if r := m2.get("ns", "zz", "sh.helm.release.v1.zz.v1", "rv-zz", true); r != nil {
		t.Error("answered a release the list did not find")
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d lists, want 2 (one per memo and namespace)", n)
	}
}

// A list that fails is told once and not made again; what it handed over
// before failing is used, the rest is read alone. A revision this process
// wrote (preload false) lists nothing.
func TestPreloadFailureIsRemembered(t *testing.T) {
	s := helmWritten(t, deployedRelease("a", 1), "1")
	var calls, failed atomic.Int32
	m := NewPreloadingMemo(func(_ context.Context, _ string, add func(*corev1.Secret)) error {
		calls.Add(1)
		add(s)
		return errors.New("forbidden")
	}, func(string, error) { failed.Add(1) })
	if r := m.get("ns", "x", "sh.helm.release.v1.x.v1", "2", false); r != nil || calls.Load() != 0 {
		t.Fatalf("a miss without preload listed (%d) or answered (%v)", calls.Load(), r)
	}
	if r := m.get("ns", "b", "sh.helm.release.v1.b.v1", "2", true); r != nil {
		t.Error("answered a release the failed list did not hand over")
	}
	if r := m.get("ns", "a", "sh.helm.release.v1.a.v1", "1", true); r == nil {
		t.Error("did not answer a revision the list handed over before it failed")
	}
	if calls.Load() != 1 || failed.Load() != 1 {
		t.Errorf("%d lists and %d failures told, want 1 and 1", calls.Load(), failed.Load())
	}
}

// A Secret Helm cannot decode is left to the read of one record.
func TestPreloadSkipsUndecodableRecords(t *testing.T) {
	bad := helmWritten(t, deployedRelease("a", 1), "1")
	bad.Data = map[string][]byte{"release": []byte("not base64!")}
	m := NewPreloadingMemo(func(_ context.Context, _ string, add func(*corev1.Secret)) error {
		add(bad)
		return nil
	}, nil)
	if r := m.get("ns", "a", bad.Name, "1", true); r != nil {
		t.Errorf("answered an undecodable record: %+v", r)
	}
}

// listedSecret answers a Get of its Secret, and only that: it is the one
// method Helm's Secrets driver calls in Get, so that Helm's own decoding of
// a Secret is what the preload's is compared with.
type listedSecret struct {
	corev1client.SecretInterface
	s *corev1.Secret
}

func (l listedSecret) Get(_ context.Context, _ string, _ metav1.GetOptions) (*corev1.Secret, error) {
	return l.s, nil
}

// A record past the storage's bounds among a namespace's deployed records
// (a forged one: 256 MiB of JSON in 256 KiB of gzip) is not preloaded,
// costs the list no more than the bound, and keeps no other release's
// record from being preloaded: it is left to its own release's read, which
// reports it.
func TestPreloadSkipsARecordPastTheBounds(t *testing.T) {
	good := helmWritten(t, deployedRelease("a", 1), "rv-a")
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = w.Write([]byte(`{"name":"b","version":1,"info":{"status":"deployed"},"chart":{"metadata":{"name":"c"}}`))
	spaces := bytes.Repeat([]byte{' '}, 1<<20)
	for range 256 {
		_, _ = w.Write(spaces)
	}
	_, _ = w.Write([]byte("}"))
	_ = w.Close()
	bomb := good.DeepCopy()
	bomb.Name, bomb.ResourceVersion = "sh.helm.release.v1.b.v1", "rv-b"
	bomb.Labels["name"] = "b"
	bomb.Data = map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(z.Bytes()))}
	m := NewPreloadingMemo(func(_ context.Context, _ string, add func(*corev1.Secret)) error {
		add(bomb)
		add(good)
		return nil
	}, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if r := m.get("ns", "b", bomb.Name, "rv-b", true); r != nil {
		t.Errorf("the record past the bounds was preloaded: %+v", r.Info)
	}
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 32<<20 {
		t.Errorf("the namespace's list allocated %d MiB", a>>20)
	}
	if r := m.get("ns", "a", good.Name, "rv-a", true); r == nil || r.Version != 1 {
		t.Errorf("release a beside it: %v, want its revision 1 preloaded", r)
	}
}
