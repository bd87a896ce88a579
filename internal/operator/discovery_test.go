package operator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/helmapp/helm-app-operator/internal/operator"
)

// An APIService whose Service does not exist leaves its group in the
// cluster's discovery, stale, with no resources: every client's discovery
// is partial. The capabilities a chart sees are still read (the rest of the
// cluster's), and the failing group is logged once per process, not at
// every reading (each capabilitiesTTL).
func TestCapabilitiesUseAPartialDiscoveryAndNameTheFailingGroupOnce(t *testing.T) {
	group := "broken-" + rand.String(5) + ".test.helmapp.io"
	name := "v1beta1." + group
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"group": group, "version": "v1beta1", "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"insecureSkipTLSVerify": true, "service": map[string]any{"name": "absent", "namespace": "default", "port": int64(443)}},
	}}
	if _, err := apiServices.Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := apiServices.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting apiservice %s: %v", name, err)
		}
	})
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for what is asserted: the group failing in a discovery of the cluster.
	for start := time.Now(); !failing(dc, group); time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("the group %s does not fail discovery: the test tests nothing", group)
		}
	}

	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := operator.NewSharedCapabilitiesLogging(actionConfigGetter(t), func() time.Time { return now }, log)
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	naming := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "API group discovery failed") && strings.Contains(l, `"group"="`+group+`"`) {
				n++
			}
		}
		return n
	}

	var first *chartutil.Capabilities
	for i := range 3 {
		c, err := s.ActionConfigFor(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		caps := c.Capabilities
		if caps == nil || !caps.APIVersions.Has("apps/v1") || !caps.APIVersions.Has("apps/v1/Deployment") {
			t.Fatalf("reading %d: the capabilities of the rest of the cluster are missing: %+v", i, caps)
		}
		if i == 0 {
			first = caps
		} else if caps == first {
			t.Fatalf("reading %d: the capabilities were not read again after the TTL", i)
		}
		if n := naming(); n != 1 {
			t.Errorf("after reading %d: %d log lines name the failing group %s, want 1; log: %q", i, n, group, lines)
		}
		now = now.Add(operator.CapabilitiesTTL)
	}
}

// failing reports whether a discovery of the cluster fails for group.
func failing(dc discovery.DiscoveryInterface, group string) bool {
	_, _, err := dc.ServerGroupsAndResources()
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) {
		return false
	}
	for gv := range failed.Groups {
		if gv.Group == group {
			return true
		}
	}
	return false
}
