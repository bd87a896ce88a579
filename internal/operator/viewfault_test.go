package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/helmapp/helm-app-operator/internal/operator"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// Without HELM_APP_OPERATOR_TEST_VIEW, the manager's REST config is the one
// it was given: nothing can perturb its informers. With it, the same New
// installs the perturbation; a malformed value is refused.
func TestViewFaultOnlyWithItsVariable(t *testing.T) {
	ws, err := watches.Load(tu.DefaultWatches(t))
	if err != nil {
		t.Fatal(err)
	}
	newManagerConfig := func() (wrapped bool) {
		t.Helper()
		mgr, err := operator.New(cfg, operator.Config{MaxConcurrentReconciles: 1, MetricsBindAddress: "0",
			HealthProbeBindAddress: "0", SkipNameValidation: true}, ws)
		if err != nil {
			t.Fatal(err)
		}
		return mgr.GetConfig().WrapTransport != nil
	}
	if cfg.WrapTransport != nil {
		t.Fatal("the test's REST config already wraps its transport: the test proves nothing")
	}
	t.Setenv(operator.CrashAfterWriteEnv, "")
	t.Setenv(operator.WriteLogEnv, "")
	t.Setenv(operator.ViewEnv, "")
	if newManagerConfig() {
		t.Errorf("without %s, the manager's REST config wraps its transport", operator.ViewEnv)
	}
	t.Setenv(operator.ViewEnv, "missed:secrets:"+filepath.Join(t.TempDir(), "window"))
	if !newManagerConfig() {
		t.Errorf("with %s set, the manager's REST config does not wrap its transport: the perturbation is not installed", operator.ViewEnv)
	}

	same, err := operator.WithViewFault(cfg, func(string) string { return "" })
	if err != nil || same != cfg {
		t.Errorf("WithViewFault without its variable = %p, %v; want the config itself (%p)", same, err, cfg)
	}
	for _, bad := range []string{"lag", "lag:secrets", "drop:secrets:/tmp/w", "lag::/tmp/w", "lag:Secrets:/tmp/w",
		"missed:secrets:window", "missed:secrets:"} {
		if _, err := operator.WithViewFault(cfg, func(string) string { return bad }); err == nil {
			t.Errorf("%s=%s accepted", operator.ViewEnv, bad)
		}
	}
}

// syncBuffer is a log the perturbation writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// viewInformer is an informer of the resource (configmaps or secrets, obj
// its type) of ns through c, as client-go's reflector runs it (a streamed
// list, then a watch, over protobuf unless the perturbation asks for JSON).
func viewInformer(t *testing.T, c *rest.Config, ns, resource string, obj runtime.Object) cache.Store {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), resource, ns, fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	return inf.GetStore()
}

// storeView is what store holds of the test's ConfigMaps: name=greeting.
func storeView(store cache.Store) string {
	var out []string
	for _, o := range store.List() {
		cm := o.(*corev1.ConfigMap)
		if strings.HasPrefix(cm.Name, "view-") {
			out = append(out, cm.Name+"="+cm.Data["greeting"])
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// On a real API server: while the window's file exists, the events of the
// watched resource do not reach the informer — held back (lag) or dropped
// (missed) — and the informer's store keeps the view from before the
// window; once the file is removed, the held events are delivered
// (lag), or the watch ends with 410 Expired and the informer lists again
// (missed): the store then holds the truth, deletions included. Another
// resource's watch is never perturbed.
func TestViewFaultHoldsBackOrDropsTheWindowsEvents(t *testing.T) {
	for _, mode := range []string{"lag", "missed"} {
		t.Run(mode, func(t *testing.T) {
			c := tu.Client(t, cfg)
			ns := tu.Namespace(t, c, "view-"+mode)
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			put := func(name, greeting string) {
				t.Helper()
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"greeting": greeting}}
				if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
					return
				}
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			put("view-a", "one")
			put("view-c", "one")

			window := filepath.Join(t.TempDir(), "window")
			log := &syncBuffer{}
			wrap, perturbed, err := operator.NewViewFault(mode+":configmaps:"+window, log)
			if err != nil {
				t.Fatal(err)
			}
			store := viewInformer(t, wrap(cfg), ns, "configmaps", &corev1.ConfigMap{})
			// Secrets pass through the same transport, unperturbed.
			other := viewInformer(t, wrap(cfg), ns, "secrets", &corev1.Secret{})
			before := "view-a=one,view-c=one"
			tu.Eventually(t, time.Minute, "the informer's first view", func() (bool, string) {
				v := storeView(store)
				return v == before, v
			})

			if err := os.WriteFile(window, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			put("view-a", "two")
			put("view-b", "one")
			if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "view-c", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			tu.Eventually(t, time.Minute, "the window's three events read by the perturbation", func() (bool, string) {
				return perturbed() >= 3, fmt.Sprintf("%d perturbed", perturbed())
			})
			if v := storeView(store); v != before {
				t.Errorf("during the window the informer holds %s, want the view from before it, %s", v, before)
			}
			// Another resource during the window: seen at once.
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "view-a", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "view-s", Namespace: ns}}
			if _, err := cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			tu.Eventually(t, time.Minute, "the Secret, not perturbed, seen during the window", func() (bool, string) {
				_, ok, _ := other.GetByKey(ns + "/view-s")
				return ok, fmt.Sprintf("Secret in the store: %v", ok)
			})

			if err := os.Remove(window); err != nil {
				t.Fatal(err)
			}
			after := "view-a=two,view-b=one"
			tu.Eventually(t, time.Minute, "the truth after the window", func() (bool, string) {
				v := storeView(store)
				return v == after, v
			})
			want := map[string]string{"lag": "event(s) held back, delivered now", "missed": "event(s) dropped; the watch ends with 410 Expired"}[mode]
			tu.Eventually(t, time.Minute, "the window's end logged", func() (bool, string) {
				return strings.Contains(log.String(), want), log.String()
			})
			t.Logf("the perturbation's log:\n%s", log.String())
		})
	}
}
