package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestValuesDigestIsKeyedByTheOperatorsNamespace runs one resource under
// operators of two namespaces in turn. Each keeps its digest key in a Secret
// of its namespace, made on its first start and read on the next: the same
// values show different digests under the two, the same digest again under
// the first, and none of the changes of digest — nor the unkeyed "sha256:"
// digest an older operator published, found in the status by the upgraded
// one — makes a revision.
func TestValuesDigestIsKeyedByTheOperatorsNamespace(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "digest")
	opA, opB := tu.Namespace(t, c, "digest-op-a"), tu.Namespace(t, c, "digest-op-b")
	w := tu.DefaultWatches(t)
	run := func(opNS string) func() {
		return operatortest.Start(t, cfg, w, []string{ns}, func(c *operator.Config) { c.OperatorNamespace = opNS })
	}
	digest := func() string {
		u, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		d, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "valuesDigest")
		return d
	}
	waitDigest := func(what string, ok func(string) bool) string {
		var d string
		tu.Eventually(t, time.Minute, what, func() (bool, string) { d = digest(); return ok(d), d })
		return d
	}

	stop := run(opA)
	if err := c.Create(ctx, tu.NewCR(tu.NginxGVK, ns, "web", map[string]any{"replicaCount": int64(1)})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	dA := waitDigest("a keyed digest", func(d string) bool { return strings.HasPrefix(d, "hmac-sha256:") })
	// status.history shows the same keyed digest, never the plain one.
	cur, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	hist, _, _ := unstructured.NestedSlice(cur.Object, "status", "history")
	if len(hist) != 1 {
		t.Fatalf("status.history: %v, want the install's entry", hist)
	}
	if h, _, _ := unstructured.NestedString(hist[0].(map[string]any), "valuesDigest"); h != dA {
		t.Errorf("status.history[0].valuesDigest %q, want deployedRelease's %q", h, dA)
	}
	stop()
	var key corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: opA, Name: operator.DigestKeySecret}, &key); err != nil {
		t.Fatalf("the key Secret of the first operator: %v", err)
	}
	if n := len(key.Data[operator.DigestKeyField]); n != release.DigestKeySize {
		t.Errorf("the key holds %d bytes, want %d", n, release.DigestKeySize)
	}

	// What an operator of the unkeyed scheme published, as the upgraded
	// one finds it.
	rel, err := helmStorage(t, ns).Deployed("web")
	if err != nil {
		t.Fatal(err)
	}
	old := release.ValuesDigest(rel.Config)
	u := tu.NewCR(tu.NginxGVK, ns, "web", nil)
	patch := []byte(`{"status":{"deployedRelease":{"valuesDigest":"` + old + `"}}}`)
	if err := c.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}

	stop = run(opB)
	dB := waitDigest("the second operator's keyed digest", func(d string) bool { return d != old && strings.HasPrefix(d, "hmac-sha256:") })
	stop()
	if dB == dA {
		t.Errorf("two operator namespaces, same values, same digest %s", dA)
	}
	wantRevisions(t, ns, map[string]int{"web": 1})

	// The first operator again: its key was kept, not made anew.
	stop = run(opA)
	waitDigest("the first operator's digest again", func(d string) bool { return d == dA })
	stop()
	wantRevisions(t, ns, map[string]int{"web": 1})
}
