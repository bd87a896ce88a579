package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/kubectl/pkg/validation"

	"github.com/helmapp/helm-app-operator/internal/operator"
)

// The cluster's capabilities are read once and shared by the action
// configurations built within operator.CapabilitiesTTL, and read again after it.
func TestCapabilitiesAreShared(t *testing.T) {
	hc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	acg := actionConfigGetter(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := operator.NewSharedCapabilities(acg, func() time.Time { return now })
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))

	first, err := s.ActionConfigFor(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	v, err := hc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if c := first.Capabilities; c == nil || c.KubeVersion.Version != v.GitVersion || !c.APIVersions.Has("apps/v1") {
		t.Fatalf("capabilities %+v, server %s", c, v.GitVersion)
	}
	now = now.Add(operator.CapabilitiesTTL / 2)
	second, err := s.ActionConfigFor(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || second.Capabilities != first.Capabilities {
		t.Errorf("within the TTL: a new configuration must share the capabilities read once")
	}
	// The manifests' validator, which parses the cluster's OpenAPI documents,
	// is shared too, and judges as Helm's own does.
	v1, v2 := validator(t, first), validator(t, second)
	if v1 != v2 {
		t.Errorf("within the TTL: a new configuration must share the manifest validator")
	}
	own, err := acg.ActionConfigFor(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"},"dataa":{}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":1}}`,
	} {
		want, got := fmt.Sprint(validator(t, own).ValidateBytes([]byte(m))), fmt.Sprint(v2.ValidateBytes([]byte(m)))
		if got != want {
			t.Errorf("the shared validator judged %s as %q, Helm's own as %q", m, got, want)
		}
	}
	now = now.Add(operator.CapabilitiesTTL)
	third, err := s.ActionConfigFor(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	if third.Capabilities == first.Capabilities || third.Capabilities.KubeVersion.Version != v.GitVersion {
		t.Errorf("after the TTL: the capabilities must be read again")
	}
	if validator(t, third) == v1 {
		t.Errorf("after the TTL: the manifest validator must be built again")
	}
}

// validator returns the strict manifest validator of cfg's Helm kube client.
func validator(t *testing.T, cfg *action.Configuration) validation.Schema {
	t.Helper()
	f := operator.KubeFactory(cfg.KubeClient)
	if f == nil {
		t.Fatalf("Helm's kube client is a %T", cfg.KubeClient)
	}
	v, err := f.Validator(metav1.FieldValidationStrict)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
