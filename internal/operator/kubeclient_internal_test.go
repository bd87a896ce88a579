package operator

import (
	"testing"

	"helm.sh/helm/v3/pkg/kube"
)

// Helm's concrete client loses only its probe; any other client is kept.
func TestWithoutProbe(t *testing.T) {
	kc := kube.New(nil)
	got := withoutProbe(kc)
	u, ok := got.(unprobedKube)
	if !ok || u.Client != kc {
		t.Fatalf("withoutProbe(*kube.Client) = %T, want the client wrapped", got)
	}
	if err := got.IsReachable(); err != nil {
		t.Errorf("IsReachable: %v", err)
	}
	if _, ok := got.(kube.InterfaceDeletionPropagation); !ok {
		t.Error("the wrapped client lost kube.InterfaceDeletionPropagation")
	}
	other := struct{ kube.Interface }{kc}
	if withoutProbe(other) != kube.Interface(other) {
		t.Error("a client of another kind was replaced")
	}
}
