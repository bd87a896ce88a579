package readiness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// An APIService whose Service does not exist: the API server itself writes
// Available=False (ServiceNotFound), and the object is not ready with the
// API server's reason and message, where kstatus alone calls it Current.
func TestAnUnavailableAPIServiceIsNotReady(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "apiservice")
	name := "v1beta1." + ns + ".test.helmapp.io"
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"group": ns + ".test.helmapp.io", "version": "v1beta1", "groupPriorityMinimum": int64(100),
			"versionPriority": int64(100), "insecureSkipTLSVerify": true,
			"service": map[string]any{"name": "absent", "namespace": ns, "port": int64(443)}},
	}}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), svc); err != nil {
			t.Errorf("deleting apiservice %s: %v", name, err)
		}
	})
	// Wait for what is asserted: the API server's verdict.
	var reason, message string
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, svc); err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
		for _, cd := range conds {
			if m := cd.(map[string]any); m["type"] == "Available" && m["status"] == "False" {
				reason, message = m["reason"].(string), m["message"].(string)
			}
		}
		if reason != "" {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the API server wrote no Available=False: %v", svc.Object["status"])
		}
	}
	if ks, err := kstatus.Compute(svc); err != nil || ks.Status != kstatus.CurrentStatus {
		t.Fatalf("kstatus: %v, %v; the rule exists because kstatus calls it Current", ks, err)
	}

	ref := readiness.ObjectRef{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService", Name: name}
	res := readiness.Checker{Reader: c}.Check(ctx, []readiness.ObjectRef{ref})
	want := "Available=False " + reason + ": " + message
	if r := res[0]; r.Status != kstatus.InProgressStatus || r.Reason != status.ReasonAPIServiceUnavailable || r.Message != want {
		t.Errorf("got %s %s %q, want InProgress %s %q", r.Status, r.Reason, r.Message, status.ReasonAPIServiceUnavailable, want)
	}
	s := readiness.Summarize(res)
	if s.AllReady || s.Reason != status.ReasonAPIServiceUnavailable || !strings.HasPrefix(s.Message, "APIService "+name+": Available=False ") {
		t.Errorf("summary %+v", s)
	}
	t.Logf("%s: %s", s.Reason, s.Message)
}
