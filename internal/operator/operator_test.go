package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// helmStorage reads releases the way the helm CLI does: its own Secret driver.
func helmStorage(t *testing.T, ns string) *storage.Storage {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return storage.Init(driver.NewSecrets(cs.CoreV1().Secrets(ns)))
}

func TestInstallUpgradeUninstall(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "lifecycle")
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns})

	// Install on create.
	cr := tu.NewCR(tu.NginxGVK, ns, "web", map[string]any{"replicaCount": int64(2), "page": map[string]any{"title": "First"}})
	if err := c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	u := tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	if !tu.ConditionIs(u, status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful) {
		t.Errorf("Deployed after install: %s", tu.Describe(u))
	}
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision"); rev != 1 {
		t.Errorf("deployedRelease.revision = %d, want 1", rev)
	}
	// Every object of the nginx chart is in the resource's namespace and it
	// has no delete hook: the release needs no finalizer, the garbage
	// collector deletes it with the resource (release.NeedsFinalizer).
	if got := u.GetFinalizers(); len(got) != 0 {
		t.Errorf("finalizers = %v, want none", got)
	}
	if msg := tu.Condition(u, status.TypeInitialized).Message; !strings.Contains(msg, "garbage-collected") {
		t.Errorf("Initialized says %q, want that the release is garbage-collected with the resource", msg)
	}

	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep); err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}
	if *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %d, want 2", *dep.Spec.Replicas)
	}
	if refs := dep.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != u.GetUID() {
		t.Errorf("Deployment owner references = %+v, want the CR", refs)
	}
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.ConfigMap{}, &corev1.ServiceAccount{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, obj); err != nil {
			t.Errorf("the chart's %T: %v", obj, err)
		}
	}

	// The release is where the helm CLI looks for it.
	hs := helmStorage(t, ns)
	deployed, err := hs.Deployed("web")
	if err != nil {
		t.Fatalf("helm storage has no deployed release: %v", err)
	}
	if deployed.Version != 1 || deployed.Chart.Metadata.Name != "nginx" {
		t.Errorf("helm storage: revision %d of chart %s", deployed.Version, deployed.Chart.Metadata.Name)
	}

	// Upgrade when the spec changes.
	tu.PatchSpec(t, c, tu.NginxGVK, ns, "web", map[string]any{"replicaCount": int64(3)})
	u = tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", "deployedRelease", "revision"); rev != 2 {
		t.Errorf("deployedRelease.revision after upgrade = %d, want 2", rev)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep); err != nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment after upgrade: replicas %v, err %v; want 3", dep.Spec.Replicas, err)
	}
	hist, err := hs.History("web")
	if err != nil || len(hist) != 2 {
		t.Fatalf("helm history: %d revisions, err %v; want 2", len(hist), err)
	}
	statuses := map[int]release.Status{}
	for _, r := range hist {
		statuses[r.Version] = r.Info.Status
	}
	if statuses[1] != release.StatusSuperseded || statuses[2] != release.StatusDeployed {
		t.Errorf("helm history statuses = %v, want 1 superseded and 2 deployed", statuses)
	}

	// Deleted, the resource goes at once. Its release is the garbage
	// collector's, which envtest does not run (test/e2e
	// TestDeletionWithoutFinalizerCollectsTheRelease runs it): what this
	// test checks is that the collector would take it all, every object and
	// every record carrying the resource's owner reference.
	secrets := &corev1.SecretList{}
	if err := c.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "web"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 2 {
		t.Errorf("%d release Secrets, want 2", len(secrets.Items))
	}
	for _, s := range secrets.Items {
		if refs := s.OwnerReferences; len(refs) != 1 || refs[0].UID != u.GetUID() {
			t.Errorf("release Secret %s owner references = %+v, want the CR", s.Name, refs)
		}
	}
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.ConfigMap{}, &corev1.ServiceAccount{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, obj); err != nil {
			t.Fatalf("the chart's %T: %v", obj, err)
		}
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != u.GetUID() {
			t.Errorf("%T owner references = %+v, want the CR", obj, refs)
		}
	}
	if err := c.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the CR to be gone", func() (bool, string) {
		_, err := tu.Get(t, c, tu.NginxGVK, ns, "web")
		return apierrors.IsNotFound(err), "still there"
	})
}

func TestTwoKindsFromOneWatchesFile(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "kinds")
	operatortest.Start(t, cfg, tu.DefaultWatches(t), []string{ns})

	if err := c.Create(ctx, tu.NewCR(tu.NginxGVK, ns, "web", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "echo", map[string]any{"message": "hi there"})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, "")
	u := tu.WaitForCondition(t, c, tu.EchoGVK, ns, "echo", status.TypeReady, metav1.ConditionTrue, "")
	if chart, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "chart"); chart != "echo" {
		t.Errorf("Echo deployed chart %q, want echo", chart)
	}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "echo"}, dep); err != nil {
		t.Errorf("the echo chart's Deployment: %v", err)
	}
}

func TestWatchNamespaceList(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	a, b, other := tu.Namespace(t, c, "a"), tu.Namespace(t, c, "b"), tu.Namespace(t, c, "c")
	operatortest.Start(t, cfg, tu.DefaultWatches(t), operator.ParseNamespaces(" "+a+", "+b+" ,"))

	for _, ns := range []string{other, a, b} {
		if err := c.Create(ctx, tu.NewCR(tu.EchoGVK, ns, "echo", map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	tu.WaitForCondition(t, c, tu.EchoGVK, a, "echo", status.TypeReady, metav1.ConditionTrue, "")
	tu.WaitForCondition(t, c, tu.EchoGVK, b, "echo", status.TypeReady, metav1.ConditionTrue, "")
	// The CR in c was created first; a and b are done, so c had its chance.
	time.Sleep(2 * time.Second)
	u, err := tu.Get(t, c, tu.EchoGVK, other, "echo")
	if err != nil {
		t.Fatal(err)
	}
	if _, has := u.Object["status"]; has || len(u.GetFinalizers()) > 0 {
		t.Errorf("the CR in an unwatched namespace was touched: status %v, finalizers %v", u.Object["status"], u.GetFinalizers())
	}
	if _, err := helmStorage(t, other).History("echo"); err == nil {
		t.Errorf("a release was installed in the unwatched namespace %s", other)
	}
}

func TestOverrideValuesFromTheEnvironment(t *testing.T) {
	ctx := context.Background()
	c := tu.Client(t, cfg)
	ns := tu.Namespace(t, c, "override")
	t.Setenv("HELMAPP_TEST_NGINX_TAG", "1.27.9-test")
	operatortest.Start(t, cfg, tu.WatchesFile(t, `
- group: web.helmapp.io
  version: v1alpha1
  kind: Nginx
  chart: helm-charts/nginx
  overrideValues:
    image.tag: $HELMAPP_TEST_NGINX_TAG
`), []string{ns})

	// The CR asks for another tag; the operator's override wins.
	if err := c.Create(ctx, tu.NewCR(tu.NginxGVK, ns, "web", map[string]any{"image": map[string]any{"tag": "1.0"}})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, c, tu.NginxGVK, ns, "web", status.TypeReady, metav1.ConditionTrue, "")
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, dep); err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":1.27.9-test") {
		t.Errorf("image = %q, want the tag from HELMAPP_TEST_NGINX_TAG", img)
	}
}

// The CRD's spec schema comes from the chart's values.schema.json, so
// `kubectl explain` shows the chart's descriptions.
func TestKubectlExplainShowsValueDescriptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := cp.Kubectl(ctx, "explain", "nginxes.spec")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replicaCount", "<integer>", "Number of nginx pods", "page", "<Object>"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain nginxes.spec does not show %q:\n%s", want, out)
		}
	}
	out, err = cp.Kubectl(ctx, "explain", "nginxes.spec.service.type")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ClusterIP") {
		t.Errorf("kubectl explain does not show the enum of service.type:\n%s", out)
	}
}
