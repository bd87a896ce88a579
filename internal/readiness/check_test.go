package readiness

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// obj builds an unstructured object of apiVersion and kind named "web" in
// namespace ns at generation 1 from the rest of its content.
func obj(apiVersion, kind string, content map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: content}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName("web")
	u.SetGeneration(1)
	return u
}

func conds(cs ...map[string]any) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

func cond(typ, st, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": st, "reason": reason, "message": msg}
}

func deployment(replicas int64, st map[string]any) *unstructured.Unstructured {
	if st != nil {
		st["observedGeneration"] = int64(1)
	}
	content := map[string]any{"spec": map[string]any{"replicas": replicas,
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}}
	if st != nil {
		content["status"] = st
	}
	return obj("apps/v1", "Deployment", content)
}

func TestObjectResult(t *testing.T) {
	available := conds(cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
		cond("Progressing", "True", "NewReplicaSetAvailable", `ReplicaSet "web-5d8c" has successfully progressed.`))
	tests := []struct {
		name    string
		u       *unstructured.Unstructured
		err     error
		want    kstatus.Status
		wantMsg string
	}{{
		name: "deployment with 1 of 3 replicas available",
		u: deployment(3, map[string]any{"replicas": int64(3), "updatedReplicas": int64(3),
			"readyReplicas": int64(1), "availableReplicas": int64(1)}),
		want: kstatus.InProgressStatus, wantMsg: "1/3 replicas available",
	}, {
		name: "deployment just created, no status yet",
		u:    deployment(3, nil),
		want: kstatus.InProgressStatus, wantMsg: "0/3 replicas available, 0/3 updated",
	}, {
		name: "deployment rolling out",
		u: deployment(3, map[string]any{"replicas": int64(4), "updatedReplicas": int64(1),
			"readyReplicas": int64(3), "availableReplicas": int64(3)}),
		want: kstatus.InProgressStatus, wantMsg: "3/3 replicas available, 1/3 updated, 1 old pending termination",
	}, {
		name: "deployment available",
		u: deployment(3, map[string]any{"replicas": int64(3), "updatedReplicas": int64(3),
			"readyReplicas": int64(3), "availableReplicas": int64(3), "conditions": available}),
		want: kstatus.CurrentStatus, wantMsg: "Deployment is available. Replicas: 3",
	}, {
		name: "deployment past its progress deadline",
		u: deployment(3, map[string]any{"replicas": int64(3), "updatedReplicas": int64(3),
			"readyReplicas": int64(1), "availableReplicas": int64(1), "conditions": conds(
				cond("Progressing", "False", "ProgressDeadlineExceeded", `ReplicaSet "web-5d8c" has timed out progressing.`))}),
		want: kstatus.FailedStatus, wantMsg: "1/3 replicas available; progress deadline exceeded",
	}, {
		name: "deployment whose new generation is not observed keeps kstatus's message",
		u: func() *unstructured.Unstructured {
			u := deployment(3, map[string]any{"replicas": int64(3), "updatedReplicas": int64(3),
				"readyReplicas": int64(3), "availableReplicas": int64(3), "conditions": available})
			u.SetGeneration(2)
			return u
		}(),
		want: kstatus.InProgressStatus, wantMsg: "Deployment generation is 2, but latest observed generation is 1",
	}, {
		name: "statefulset with 1 of 3 ready",
		u: obj("apps/v1", "StatefulSet", map[string]any{"spec": map[string]any{"replicas": int64(3)},
			"status": map[string]any{"observedGeneration": int64(1), "replicas": int64(3), "readyReplicas": int64(1),
				"updatedReplicas": int64(3), "currentReplicas": int64(3)}}),
		want: kstatus.InProgressStatus, wantMsg: "1/3 replicas ready",
	}, {
		name: "daemonset with 1 of 2 available",
		u: obj("apps/v1", "DaemonSet", map[string]any{"status": map[string]any{"observedGeneration": int64(1),
			"desiredNumberScheduled": int64(2), "currentNumberScheduled": int64(2), "updatedNumberScheduled": int64(2),
			"numberAvailable": int64(1), "numberReady": int64(1)}}),
		want: kstatus.InProgressStatus, wantMsg: "1/2 pods available",
	}, {
		name: "service",
		u:    obj("v1", "Service", map[string]any{"spec": map[string]any{"type": "ClusterIP", "clusterIP": "10.0.0.1"}}),
		want: kstatus.CurrentStatus, wantMsg: "Service is ready",
	}, {
		name: "configmap",
		u:    obj("v1", "ConfigMap", map[string]any{"data": map[string]any{"index.html": "hi"}}),
		want: kstatus.CurrentStatus, wantMsg: "Resource is always ready",
	}, {
		name: "a kind kstatus has no rules for, without status, is current",
		u:    obj("example.com/v1", "Widget", map[string]any{"spec": map[string]any{"size": "L"}}),
		want: kstatus.CurrentStatus, wantMsg: "Resource is current",
	}, {
		name: "a ServiceAccount, which kstatus has no rules for either, is current",
		u:    obj("v1", "ServiceAccount", map[string]any{}),
		want: kstatus.CurrentStatus, wantMsg: "Resource is current",
	}, {
		name: "an unknown kind with Ready=False is in progress, with its own reason",
		u: obj("example.com/v1", "Widget", map[string]any{"status": map[string]any{
			"conditions": conds(cond("Ready", "False", "Provisioning", "waiting for the bucket"))}}),
		want: kstatus.InProgressStatus, wantMsg: "Ready=False Provisioning: waiting for the bucket",
	}, {
		name: "an unknown kind with Ready=True is current",
		u: obj("example.com/v1", "Widget", map[string]any{"status": map[string]any{
			"conditions": conds(cond("Ready", "True", "Provisioned", ""))}}),
		want: kstatus.CurrentStatus, wantMsg: "Resource is Ready",
	}, {
		name: "an unknown kind with Stalled=True has failed",
		u: obj("example.com/v1", "Widget", map[string]any{"status": map[string]any{
			"conditions": conds(cond("Stalled", "True", "QuotaExceeded", "bucket quota exceeded"))}}),
		want: kstatus.FailedStatus, wantMsg: "bucket quota exceeded",
	}, {
		name: "an unknown kind whose conditions are not a list cannot be judged",
		u:    obj("example.com/v1", "Widget", map[string]any{"status": map[string]any{"conditions": "broken"}}),
		want: kstatus.UnknownStatus, wantMsg: "its status could not be computed: ",
	}, {
		name: "an object being deleted is terminating",
		u: func() *unstructured.Unstructured {
			u := obj("v1", "ConfigMap", map[string]any{})
			_ = unstructured.SetNestedField(u.Object, "2026-11-29T12:00:00Z", "metadata", "deletionTimestamp")
			return u
		}(),
		want: kstatus.TerminatingStatus, wantMsg: "Resource scheduled for deletion",
	}, {
		name: "not found",
		err:  apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "web"),
		want: kstatus.NotFoundStatus, wantMsg: "not found",
	}, {
		name: "a kind the API server does not serve is not found",
		err:  &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}},
		want: kstatus.NotFoundStatus, wantMsg: "not found: the API server does not serve example.com/v1 Widget",
	}, {
		name: "a read that fails is unknown, with the error",
		err:  apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "web", errors.New("no RBAC")),
		want: kstatus.UnknownStatus, wantMsg: `reading it failed: widgets "web" is forbidden: no RBAC`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := ObjectRef{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "web"}
			if tt.u != nil {
				ref = ObjectRef{APIVersion: tt.u.GetAPIVersion(), Kind: tt.u.GetKind(), Namespace: "ns", Name: "web"}
			}
			got := objectResult(ref, tt.u, tt.err, status.Redactor{})
			if got.Ref != ref {
				t.Errorf("ref = %+v, want %+v", got.Ref, ref)
			}
			if got.Status != tt.want || !strings.HasPrefix(got.Message, tt.wantMsg) {
				t.Errorf("objectResult() = %s %q, want %s %q", got.Status, got.Message, tt.want, tt.wantMsg)
			}
		})
	}
}

func TestObjectResultBoundsTheMessage(t *testing.T) {
	err := errors.New(strings.Repeat("very long\nerror ", 200))
	got := objectResult(ObjectRef{Kind: "ConfigMap", Name: "web"}, nil, err, status.Redactor{})
	if len(got.Message) > MaxObjectMessageLength || strings.Contains(got.Message, "\n") {
		t.Errorf("message is %d bytes or has a newline: %q", len(got.Message), got.Message)
	}
}

func TestPodSelector(t *testing.T) {
	sel, ok := podSelector(deployment(1, nil))
	if !ok || sel.String() != "app=web" {
		t.Errorf("podSelector = %v, %t; want app=web", sel, ok)
	}
	if _, ok := podSelector(obj("apps/v1", "Deployment", map[string]any{"spec": map[string]any{"selector": map[string]any{}}})); ok {
		t.Error("an empty selector must select nothing rather than every pod")
	}
	if _, ok := podSelector(obj("apps/v1", "Deployment", map[string]any{})); ok {
		t.Error("a missing selector must select nothing")
	}
}
