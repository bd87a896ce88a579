package reconciler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// TestAPIWarningIsTheCause installs a chart whose Deployment runs a
// privileged container into a namespace that warns on Pod Security
// restricted: the API server answers the Deployment's create with `Warning:
// would violate PodSecurity "restricted:latest": ...`. The pods (allowed:
// the namespace only warns) ask for a node that does not exist, so the
// Deployment stays not available. The resource gets one APIWarning event
// naming the Deployment, and while the Deployment is not Current the
// warning is its cause in status.resources and ResourcesReady (before its
// pods' Unschedulable).
func TestAPIWarningIsTheCause(t *testing.T) {
	t.Parallel()
	e := newNamespace(t)
	ctx := context.Background()
	ns := &corev1.Namespace{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: e.ns}, ns); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels["pod-security.kubernetes.io/warn"] = "restricted"
	if err := e.c.Patch(ctx, ns, patch); err != nil {
		t.Fatal(err)
	}
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "warned"))
	if err != nil {
		t.Fatal(err)
	}
	e.launch(tu.WatchesFile(t, `
- {group: test.helmapp.io, version: v1, kind: Widget, chart: `+chart+`}
`), nil)

	u := e.create(widgetGVK, "web", map[string]any{})
	ev := e.waitEvent(u, corev1.EventTypeWarning, reconciler.EventAPIWarning)
	for _, want := range []string{"Deployment web", `would violate PodSecurity "restricted:latest"`} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("the APIWarning event %q does not say %q", ev.Message, want)
		}
	}
	if ev.Action != status.ActionInstall {
		t.Errorf("the APIWarning event's action is %q, want %s", ev.Action, status.ActionInstall)
	}

	var got *metav1.Condition
	tu.Eventually(t, 2*time.Minute, "ResourcesReady APIWarning", func() (bool, string) {
		u = e.get(widgetGVK, "web")
		got = tu.Condition(u, status.TypeResourcesReady)
		if got == nil || got.Reason != status.ReasonAPIWarning {
			return false, fmt.Sprintf("ResourcesReady %+v", got)
		}
		return true, ""
	})
	if !strings.Contains(got.Message, "Deployment web") || !strings.Contains(got.Message, "would violate PodSecurity") {
		t.Errorf("ResourcesReady's message %q does not name the Deployment and the warning", got.Message)
	}
	if ready := tu.Condition(u, status.TypeReady); ready == nil || ready.Reason != status.ReasonAPIWarning {
		t.Errorf("Ready is %+v, want reason %s", ready, status.ReasonAPIWarning)
	}
	found := false
	for _, raw := range nested(u, "status", "resources", "notReady").([]any) {
		o := raw.(map[string]any)
		if o["kind"] == "Deployment" && o["name"] == "web" {
			found = true
			if msg, _ := o["message"].(string); !strings.Contains(msg, "API server warning on apply: would violate PodSecurity") {
				t.Errorf("status.resources names the Deployment with %q, not its warning", msg)
			}
		}
	}
	if !found {
		t.Errorf("status.resources.notReady does not list the Deployment: %v", nested(u, "status", "resources"))
	}
	n := 0
	for _, ev := range e.events(u) {
		if ev.Reason == reconciler.EventAPIWarning {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d APIWarning events, want 1 (one per distinct warning of the action)", n)
	}
}
