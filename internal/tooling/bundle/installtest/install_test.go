package installtest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"go.uber.org/zap/zapcore"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
	"github.com/helmapp/helm-app-operator/internal/tooling/bundle"
)

// deniedReplicas is the replica count a ValidatingAdmissionPolicy refuses,
// to make an upgrade fail on the API server.
const deniedReplicas = 13

// TestCSVPermissionsRunTheOperator runs the operator as the bundle's
// ServiceAccount with nothing but the committed CSV's permissions, granted as
// OLM grants them for each install mode, through install, upgrade, a failed
// upgrade, recovery and uninstall. Any RBAC denial the operator meets, even
// one it only logs, fails the test.
func TestCSVPermissionsRunTheOperator(t *testing.T) {
	csv, err := bundle.ReadCSV(tu.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	c := tu.Client(t, cfg)
	tests := []struct {
		name string
		// setup returns the install, the namespace of the CR and the
		// operator's WATCH_NAMESPACE (as OLM sets it from
		// olm.targetNamespaces; nil for all).
		setup func(t *testing.T) (install, string, []string)
	}{{
		name: "OwnNamespace",
		setup: func(t *testing.T) (install, string, []string) {
			ns := tu.Namespace(t, c, "own")
			return install{operatorNS: ns, targets: []string{ns}}, ns, []string{ns}
		},
	}, {
		name: "SingleNamespace",
		setup: func(t *testing.T) (install, string, []string) {
			op, target := tu.Namespace(t, c, "operator"), tu.Namespace(t, c, "single")
			return install{operatorNS: op, targets: []string{target}}, target, []string{target}
		},
	}, {
		name: "AllNamespaces",
		setup: func(t *testing.T) (install, string, []string) {
			op, target := tu.Namespace(t, c, "operator"), tu.Namespace(t, c, "any")
			return install{operatorNS: op}, target, nil
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, crNS, watch := tc.setup(t)
			sa := grantAsOLM(t, c, csv, in)
			sc := asServiceAccount(t, sa, in.operatorNS, crNS)

			// Least privilege: a namespaced install grants nothing outside
			// the operator's and the target namespaces.
			other := tu.Namespace(t, c, "other")
			if got := canI(t, sc, "get", "", "secrets", other); got != (in.targets == nil) {
				t.Errorf("may read Secrets of an unrelated namespace: %v, want %v", got, in.targets == nil)
			}
			if canI(t, sc, "list", "", "nodes", "") || canI(t, sc, "create", "apiextensions.k8s.io", "customresourcedefinitions", "") {
				t.Error("the ServiceAccount has cluster-scoped rights it does not need")
			}
			// ServiceAccounts are off by default: no impersonate at all.
			for _, res := range []string{"serviceaccounts", "users", "groups"} {
				if canI(t, sc, "impersonate", "", res, crNS) {
					t.Errorf("may impersonate %s in %s with ServiceAccounts off", res, crNS)
				}
			}
			// The chunked storage driver deletes a revision's chunks by label.
			if !canI(t, sc, "deletecollection", "", "secrets", crNS) {
				t.Errorf("may not deletecollection Secrets in %s (storage: chunked)", crNS)
			}

			// Leases: the operator may create one and read or renew its own
			// (the leader election ID the CSV's Deployment passes), and no
			// other controller's, even when OLM lifts the rules to a
			// ClusterRole for AllNamespaces.
			leaseID := leaderElectionID(t, csv)
			if !canI(t, sc, "create", "coordination.k8s.io", "leases", in.operatorNS) ||
				!canIName(t, sc, "update", "coordination.k8s.io", "leases", in.operatorNS, leaseID) {
				t.Errorf("may not create, or update its own Lease %s in %s", leaseID, in.operatorNS)
			}
			for _, l := range []struct{ ns, name string }{{in.operatorNS, "another-controller"}, {"kube-system", "kube-scheduler"}, {other, "another-controller"}} {
				for _, verb := range []string{"get", "update", "patch", "delete"} {
					if canIName(t, sc, verb, "coordination.k8s.io", "leases", l.ns, l.name) {
						t.Errorf("may %s the Lease %s/%s of another controller", verb, l.ns, l.name)
					}
				}
			}
			if got := canI(t, sc, "create", "coordination.k8s.io", "leases", other); got != (in.targets == nil) {
				t.Errorf("may create Leases in an unrelated namespace: %v, want %v (only AllNamespaces lifts the Role to a ClusterRole)", got, in.targets == nil)
			}

			logs := &syncBuffer{}
			logger := zap.New(zap.WriteTo(logs), zap.Level(zapcore.DebugLevel))
			metricsAddr := tu.FreeAddress(t)
			// finalizer: always, so that the deletion below is the
			// operator's uninstall, run with the CSV's grants.
			operatortest.Start(t, sc, tu.UninstallingWatches(t), watch, func(oc *operator.Config) {
				oc.Logger = &logger
				oc.MetricsBindAddress = metricsAddr // HTTPS behind TokenReview and SubjectAccessReview
				oc.LeaderElection = true
				oc.LeaderElectionNamespace = in.operatorNS
				oc.LeaderElectionID = leaseID
				oc.RetryBase, oc.RetryMax = 200*time.Millisecond, 2*time.Second
			})

			// An RBAC denial reads `User "system:serviceaccount:<ns>:<sa>"
			// cannot <verb> resource ...`; the policy's denial does not. The
			// check runs even when the test fails, as the likeliest cause.
			user := "system:serviceaccount:" + in.operatorNS + ":" + sa
			t.Cleanup(func() {
				var denials []string
				for _, line := range strings.Split(logs.String()+"\n"+globalLogs.String(), "\n") {
					if strings.Contains(line, user) && strings.Contains(line, "cannot") {
						denials = append(denials, line)
					}
				}
				if len(denials) > 0 {
					t.Errorf("the operator met %d RBAC denials; the first: %s", len(denials), denials[0])
				}
			})

			lifecycle(t, c, crNS)
			scrapeAsMetricsReader(t, c, metricsAddr, crNS)

			lease := &coordinationv1.Lease{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: in.operatorNS, Name: leaseID}, lease); err != nil {
				t.Errorf("the leader election Lease: %v", err)
			} else if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
				t.Error("the leader election Lease has no holder")
			}
		})
	}
}

// lifecycle takes an Nginx in ns through install, upgrade, an upgrade the
// API server refuses, recovery and uninstall, checking the status, the
// events and the objects at each step.
func lifecycle(t *testing.T, c client.Client, ns string) {
	ctx := context.Background()
	nginx := tu.NginxGVK
	if err := c.Create(ctx, tu.NewCR(nginx, ns, "web", map[string]any{"replicaCount": int64(1)})); err != nil {
		t.Fatal(err)
	}
	u := tu.WaitForCondition(t, c, nginx, ns, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	wantRevision(t, u, "deployedRelease", 1)
	wantReplicas(t, c, ns, 1)

	setReplicas(t, c, ns, 2)
	u = tu.WaitForCondition(t, c, nginx, ns, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	wantRevision(t, u, "deployedRelease", 2)
	wantReplicas(t, c, ns, 2)

	denyReplicas(t, c, ns, deniedReplicas)
	setReplicas(t, c, ns, deniedReplicas)
	u = tu.WaitForCondition(t, c, nginx, ns, "web", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonUpgradeError)
	if !tu.ConditionIs(u, status.TypeReady, metav1.ConditionFalse, status.ReasonUpgradeError) {
		t.Errorf("Ready after a failed upgrade: %s", tu.Describe(u))
	}
	if reason, _, _ := unstructured.NestedString(u.Object, "status", "failedRelease", "reason"); reason != status.ReasonUpgradeError {
		t.Errorf("failedRelease.reason = %q, want %s", reason, status.ReasonUpgradeError)
	}
	if msg, _, _ := unstructured.NestedString(u.Object, "status", "failedRelease", "message"); msg == "" {
		t.Error("failedRelease.message is empty")
	}
	wantRevision(t, u, "deployedRelease", 2)
	wantReplicas(t, c, ns, 2)

	setReplicas(t, c, ns, 3)
	u = tu.WaitForCondition(t, c, nginx, ns, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
	if !tu.ConditionIs(u, status.TypeReleaseFailed, metav1.ConditionFalse, "") {
		t.Errorf("ReleaseFailed after recovery: %s", tu.Describe(u))
	}
	wantReplicas(t, c, ns, 3)

	// Events went through the events.k8s.io/v1 API, in the CR's namespace.
	want := []string{reconciler.EventInstallSucceeded, reconciler.EventUpgradeSucceeded, reconciler.EventUpgradeFailed}
	tu.Eventually(t, 30*time.Second, "the operator's events", func() (bool, string) {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, e := range evs.Items {
			if e.Regarding.Name == "web" {
				got = append(got, e.Reason)
			}
		}
		for _, r := range want {
			if !slices.Contains(got, r) {
				return false, fmt.Sprintf("reasons %v", got)
			}
		}
		return true, ""
	})

	if err := c.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, time.Minute, "the CR to be gone", func() (bool, string) {
		_, err := tu.Get(t, c, nginx, ns, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment survived the uninstall: %v", err)
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": "web"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d release Secrets survived the uninstall", len(secrets.Items))
	}
}

// leaderElectionID returns the --leader-election-id the CSV's Deployment
// passes to the manager: the only Lease its rules let it read and update.
func leaderElectionID(t *testing.T, csv *v1alpha1.ClusterServiceVersion) string {
	t.Helper()
	for _, a := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--leader-election-id="); ok {
			return v
		}
	}
	t.Fatal("the CSV's Deployment passes no --leader-election-id")
	return ""
}

func setReplicas(t *testing.T, c client.Client, ns string, n int) {
	t.Helper()
	u := tu.NewCR(tu.NginxGVK, ns, "web", nil)
	patch := fmt.Sprintf(`{"spec":{"replicaCount":%d}}`, n)
	if err := c.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("setting replicaCount %d: %v", n, err)
	}
}

func wantRevision(t *testing.T, u *unstructured.Unstructured, field string, want int64) {
	t.Helper()
	if rev, _, _ := unstructured.NestedInt64(u.Object, "status", field, "revision"); rev != want {
		t.Errorf("status.%s.revision = %d, want %d (%s)", field, rev, want, tu.Describe(u))
	}
}

func wantReplicas(t *testing.T, c client.Client, ns string, want int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
		t.Errorf("Deployment replicas = %v, want %d", d.Spec.Replicas, want)
	}
}

// denyReplicas makes the API server refuse Deployments with n replicas in ns,
// with a ValidatingAdmissionPolicy and its binding, and waits until it does.
func denyReplicas(t *testing.T, c client.Client, ns string, n int) {
	t.Helper()
	ctx := context.Background()
	tu.DenyInNamespace(t, c, ns+"-deny-replicas", ns,
		[]admissionv1.NamedRuleWithOperations{tu.Rule("apps", "deployments", admissionv1.Create, admissionv1.Update)},
		admissionv1.Validation{
			Expression: fmt.Sprintf("!has(object.spec.replicas) || object.spec.replicas != %d", n),
			Message:    fmt.Sprintf("%d replicas are not allowed in this namespace", n),
		})

	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
			},
		},
	}
	tu.Eventually(t, 30*time.Second, "the admission policy to deny", func() (bool, string) {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "not allowed"), fmt.Sprint(err)
	})
}

func ptr[T any](v T) *T { return &v }

// syncBuffer collects concurrent log output.
type syncBuffer = tu.SyncBuffer
