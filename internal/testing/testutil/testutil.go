// Package testutil holds what the envtest suites share: a control plane per
// test binary, a namespace per test, and the polling helpers that read status
// the way a user does. It links none of the manager's packages, so that the
// tests of the packages it is built from can use it; the operator run
// in-process is internal/testing/operatortest.
package testutil

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// Kinds of the product.
var (
	NginxGVK = schema.GroupVersionKind{Group: "web.helmapp.io", Version: "v1alpha1", Kind: "Nginx"}
	EchoGVK  = schema.GroupVersionKind{Group: "web.helmapp.io", Version: "v1alpha1", Kind: "Echo"}
)

// RepoRoot is the checkout's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// StartAPIServer starts kube-apiserver and etcd only (no controllers, no
// nodes) with the project's CRDs: for tests that set objects' status by hand.
func StartAPIServer(extraCRDDirs ...string) (*controlplane.ControlPlane, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dirs := append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...)
	return controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: dirs})
}

// StartControlPlane starts a local cluster — kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and kwok with one fake node, so that
// Deployments really become Available — with the project's CRDs (plus extra
// CRD directories), for a test binary's TestMain.
func StartControlPlane(extraCRDDirs ...string) (*controlplane.ControlPlane, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dirs := append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...)
	return controlplane.Start(ctx, controlplane.Options{CRDDirectoryPaths: dirs, Full: true})
}

// Client returns a client for cfg.
func Client(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// Namespace creates a namespace for one test.
func Namespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5)}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// WatchesFile writes a watches file whose chart paths are made absolute
// (relative to the repository root) and returns its path.
func WatchesFile(t testing.TB, content string) string {
	t.Helper()
	content = strings.ReplaceAll(content, "chart: helm-charts/", "chart: "+filepath.Join(RepoRoot(), "helm-charts")+"/")
	p := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// DefaultWatches is the project's own watches.yaml.
func DefaultWatches(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return WatchesFile(t, string(b))
}

// UninstallingWatches is DefaultWatches with `finalizer: always` on every
// entry: each resource's deletion takes the operator's uninstall path (the
// path that needs the operator's delete grants), where the default leaves a
// finalizer-free release to the garbage collector, which envtest does not
// run.
func UninstallingWatches(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "\n  watchDependentResources: true"
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("watches.yaml has no %q to add finalizer: always beside", anchor)
	}
	return WatchesFile(t, strings.ReplaceAll(string(b), anchor, anchor+"\n  finalizer: always"))
}

// NewCR returns a resource of gvk with spec.
func NewCR(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// Get reads a resource of gvk.
func Get(t testing.TB, c client.Client, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// Condition returns the condition typ of u's status, or nil.
func Condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, _ := r.(map[string]any)
		c := metav1.Condition{}
		c.Type, _ = m["type"].(string)
		s, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(s)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		if g, ok := m["observedGeneration"].(int64); ok {
			c.ObservedGeneration = g
		}
		if ts, ok := m["lastTransitionTime"].(string); ok {
			if tt, err := time.Parse(time.RFC3339, ts); err == nil {
				c.LastTransitionTime = metav1.NewTime(tt)
			}
		}
		conds = append(conds, c)
	}
	return meta.FindStatusCondition(conds, typ)
}

// ConditionIs tells whether u's condition typ has status st and reason.
func ConditionIs(u *unstructured.Unstructured, typ string, st metav1.ConditionStatus, reason string) bool {
	c := Condition(u, typ)
	return c != nil && c.Status == st && (reason == "" || c.Reason == reason)
}

// Describe renders u's conditions on one line for failure messages.
func Describe(u *unstructured.Unstructured) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, r := range raw {
		m, _ := r.(map[string]any)
		parts = append(parts, fmt.Sprintf("%v=%v/%v(%v)", m["type"], m["status"], m["reason"], m["message"]))
	}
	og, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration")
	return fmt.Sprintf("generation %d, status.observedGeneration %v, conditions: %s", u.GetGeneration(),
		og, strings.Join(parts, "; "))
}

// Eventually polls cond until it holds or timeout passes; the timeout bounds
// a failure, it is not a performance assertion.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitForCondition waits until the resource's condition typ has status st
// (and reason, when not empty) for its current generation.
func WaitForCondition(t testing.TB, c client.Client, gvk schema.GroupVersionKind, ns, name, typ string, st metav1.ConditionStatus, reason string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	Eventually(t, 2*time.Minute, fmt.Sprintf("%s %s/%s to have %s=%s %s", gvk.Kind, ns, name, typ, st, reason), func() (bool, string) {
		var err error
		u, err = Get(t, c, gvk, ns, name)
		if err != nil {
			return false, err.Error()
		}
		cond := Condition(u, typ)
		if cond == nil || cond.ObservedGeneration != u.GetGeneration() {
			return false, safeDescribe(u)
		}
		return ConditionIs(u, typ, st, reason), safeDescribe(u)
	})
	return u
}

func safeDescribe(u *unstructured.Unstructured) string {
	if _, ok := u.Object["status"].(map[string]any); !ok {
		return "no status"
	}
	return Describe(u)
}

// WatchClient returns a client that can also watch.
func WatchClient(t testing.TB, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// Main is a test binary's TestMain body: it starts a control plane with start
// (StartControlPlane or StartAPIServer), hands it to use, runs the tests and
// stops it. It does not return.
func Main(m *testing.M, start func(...string) (*controlplane.ControlPlane, error), use func(*controlplane.ControlPlane), extraCRDDirs ...string) {
	cp, err := start(extraCRDDirs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		os.Exit(1)
	}
	use(cp)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers, such as an
// operator's logger; tests read what was logged from it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// DenyInNamespace installs a ValidatingAdmissionPolicy with one validation
// over rules, bound to namespace ns: a real API-server denial, no mock. It is
// removed when the test ends; the returned function removes it earlier (and
// waits briefly, as the API server applies a removal asynchronously).
func DenyInNamespace(t testing.TB, c client.Client, name, ns string, rules []admissionv1.NamedRuleWithOperations, v admissionv1.Validation) func() {
	t.Helper()
	ctx := context.Background()
	fail := admissionv1.Fail
	p := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			Validations:      []admissionv1.Validation{v},
		},
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, o := range []client.Object{p, b} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating admission policy %s: %v", name, err)
		}
	}
	var once sync.Once
	remove := func() {
		once.Do(func() {
			for _, o := range []client.Object{b, p} {
				if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting admission policy %s: %v", name, err)
				}
			}
			time.Sleep(2 * time.Second)
		})
	}
	t.Cleanup(remove)
	return remove
}

// Rule matches resources of a group ("" for core) for the given operations.
func Rule(group, resource string, ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
	}}
}

// FreeAddress returns a local address nothing listens on, for a server a
// test starts (the operator's metrics endpoint).
func FreeAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// PatchSpec sets fields of the resource's spec with a JSON merge patch, as a
// user's `kubectl patch --type=merge` would. Unlike a Get then Update, it
// cannot fail with a conflict when the operator writes the resource (its
// status, its finalizer) in between.
func PatchSpec(t testing.TB, c client.Client, gvk schema.GroupVersionKind, ns, name string, spec map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	u := NewCR(gvk, ns, name, nil)
	if err := c.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("patching the spec of %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
}
