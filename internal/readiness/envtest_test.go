package readiness_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// cfg is the admin config of the control plane every test here shares; each
// test works in its own namespace. The control plane runs no controllers and no
// scheduler: tests write the status a controller would.
var cfg *rest.Config

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.StartAPIServer, func(cp *controlplane.ControlPlane) { cfg = cp.Config })
}

const (
	insufficientCPU    = "0/1 nodes are available: 1 Insufficient cpu."
	insufficientMemory = "0/1 nodes are available: 1 Insufficient memory."
)

// createDeployment creates the Deployment web (3 replicas, pods app=web) and
// writes the status of one whose pods are 1 of 3 available.
func createDeployment(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	podLabels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatalf("creating the deployment: %v", err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3,
		ReadyReplicas: 1, AvailableReplicas: 1}
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatalf("writing the deployment's status: %v", err)
	}
}

// createPod creates a pod of the Deployment web; a non-empty unschedulable
// message makes it Pending with PodScheduled=False as the scheduler would.
func createPod(t *testing.T, c client.Client, ns, name, unschedulable string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	// Conditions can only be written through the status subresource.
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	if unschedulable != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: unschedulable}}
	}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatalf("writing pod %s's status: %v", name, err)
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "readiness")

	createDeployment(t, c, ns)
	createPod(t, c, ns, "web-5d8c-a1b", "")                 // scheduled
	createPod(t, c, ns, "web-5d8c-x2z", insufficientCPU)    // the first unschedulable one by name
	createPod(t, c, ns, "web-5d8c-z9y", insufficientMemory) // not reported
	for _, o := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-page"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The Service has a ready endpoint (the Service rule, issue 40).
	createSlice(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, "web-a", ptr.To(true))
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "readiness-" + rand.String(5)}}
	if err := c.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), role) })

	manifest := `---
# Source: nginx/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: web
---
# Source: nginx/templates/clusterrole.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ` + role.Name + `
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-page
---
apiVersion: v1
kind: Service
metadata:
  name: web
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
---
apiVersion: v1
kind: Secret
metadata:
  name: gone
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
`
	refs, err := readiness.ObjectsFromManifest(manifest, ns, c.RESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	if refs[1].Namespace != "" || refs[0].Namespace != ns || refs[6].Namespace != ns {
		t.Errorf("namespaces from the server's RESTMapper: %+v", refs)
	}

	results := readiness.Check(ctx, c, refs)
	got := map[string]readiness.Result{}
	for _, r := range results {
		got[r.Ref.Kind] = r
	}
	wantDeploy := "1/3 replicas available; pod web-5d8c-x2z: Unschedulable: " + insufficientCPU
	for kind, want := range map[string]struct {
		status kstatus.Status
		msg    string
	}{
		"ServiceAccount": {kstatus.CurrentStatus, "Resource is current"},
		"ClusterRole":    {kstatus.CurrentStatus, "Resource is current"},
		"ConfigMap":      {kstatus.CurrentStatus, "Resource is always ready"},
		"Service":        {kstatus.CurrentStatus, "Service is ready"},
		"Deployment":     {kstatus.InProgressStatus, wantDeploy},
		"Secret":         {kstatus.NotFoundStatus, "not found"},
		"Widget":         {kstatus.NotFoundStatus, "not found: the API server does not serve example.com/v1 Widget"},
	} {
		if r := got[kind]; r.Status != want.status || r.Message != want.msg {
			t.Errorf("%s: %s %q, want %s %q", kind, r.Status, r.Message, want.status, want.msg)
		}
	}

	s := readiness.Summarize(results)
	wantMsg := "Secret gone: not found; Widget w: not found: the API server does not serve example.com/v1 Widget; " +
		"Deployment web: " + wantDeploy
	if s.AllReady || s.Reason != readiness.ReasonNotFound || s.Total != 7 || s.Ready != 4 || s.Message != wantMsg {
		t.Errorf("Summarize() = %+v\nwant reason NotFound, 4/7 ready, message %q", s, wantMsg)
	}
}

func TestPodHints(t *testing.T) {
	ctx := context.Background()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, "hints")
	createPod(t, c, ns, "web-ok", "")

	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	if hint, err := readiness.PodHints(ctx, c, ns, sel); err != nil || hint != "" {
		t.Errorf("all pods scheduled: PodHints() = %q, %v; want nothing", hint, err)
	}
	createPod(t, c, ns, "web-pending", insufficientCPU)
	hint, err := readiness.PodHints(ctx, c, ns, sel)
	if want := "pod web-pending: Unschedulable: " + insufficientCPU; err != nil || hint != want {
		t.Errorf("PodHints() = %q, %v; want %q", hint, err, want)
	}
	for _, s := range []labels.Selector{labels.Nothing(), labels.Everything(), nil} {
		if hint, err := readiness.PodHints(ctx, c, ns, s); err != nil || hint != "" {
			t.Errorf("selector %v: PodHints() = %q, %v; want nothing", s, hint, err)
		}
	}
	if hint, _ := readiness.PodHints(ctx, c, ns, labels.SelectorFromSet(labels.Set{"app": "other"})); hint != "" {
		t.Errorf("pods of another selector were reported: %q", hint)
	}
}

func TestCheckHintsOnlyNotCurrentWorkloads(t *testing.T) {
	ctx := context.Background()
	c, ns := pendingPodOfDeployment(t, "current")

	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	rolledOut(t, c, d)
	res := readiness.Check(ctx, c, []readiness.ObjectRef{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "web"}})
	if len(res) != 1 || res[0].Status != kstatus.CurrentStatus || strings.Contains(res[0].Message, "pod ") {
		t.Errorf("Check() = %+v; want Current without a pod hint", res)
	}
}

// rolledOut writes the status of Deployment d (3 replicas, as
// createDeployment makes it) once its rollout completed: kstatus says
// Current.
func rolledOut(t *testing.T, c client.Client, d *appsv1.Deployment) {
	t.Helper()
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 3, 3
	d.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
	}
	if err := c.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// pendingPodOfDeployment makes a namespace (its name starting with prefix)
// holding the Deployment web, 1 of 3 replicas available (createDeployment),
// and its pod web-pending, unschedulable for lack of CPU; it returns the
// client and the namespace.
func pendingPodOfDeployment(t *testing.T, prefix string) (client.Client, string) {
	t.Helper()
	c := testutil.Client(t, cfg)
	ns := testutil.Namespace(t, c, prefix)
	createDeployment(t, c, ns)
	createPod(t, c, ns, "web-pending", insufficientCPU)
	return c, ns
}
