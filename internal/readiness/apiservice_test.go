package readiness

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/helmapp/helm-app-operator/internal/status"
)

func apiService(cs ...map[string]any) *unstructured.Unstructured {
	content := map[string]any{"spec": map[string]any{"group": "metrics.k8s.io", "version": "v1beta1"}}
	if cs != nil {
		content["status"] = map[string]any{"conditions": conds(cs...)}
	}
	u := obj("apiregistration.k8s.io/v1", "APIService", content)
	u.SetNamespace("")
	u.SetName("v1beta1.metrics.k8s.io")
	return u
}

// An APIService is judged by the API server's Available condition, which
// kstatus does not read: kstatus calls each of these Current.
func TestAPIServiceVerdict(t *testing.T) {
	missing := `endpoints for service/metrics-server in "kube-system" have no addresses with port name "https"`
	tests := []struct {
		name       string
		u          *unstructured.Unstructured
		want       kstatus.Status
		wantReason string
		wantMsg    string
	}{
		{"available", apiService(cond("Available", "True", "Passed", "all checks passed")), kstatus.CurrentStatus, "", ""},
		{"no endpoints", apiService(cond("Available", "False", "MissingEndpoints", missing)),
			kstatus.InProgressStatus, status.ReasonAPIServiceUnavailable, "Available=False MissingEndpoints: " + missing},
		{"discovery check failed", apiService(cond("Available", "False", "FailedDiscoveryCheck", "failing or missing response from https://10.0.0.1:443/apis/metrics.k8s.io/v1beta1: bad status from https://10.0.0.1:443/apis/metrics.k8s.io/v1beta1: 503")),
			kstatus.InProgressStatus, status.ReasonAPIServiceUnavailable, "Available=False FailedDiscoveryCheck: failing or missing response from https://10.0.0.1:443/apis/metrics.k8s.io/v1beta1: bad status from https://10.0.0.1:443/apis/metrics.k8s.io/v1beta1: 503"},
		{"unknown", apiService(cond("Available", "Unknown", "", "")),
			kstatus.InProgressStatus, status.ReasonAPIServiceUnavailable, "Available=Unknown"},
		{"not reported yet", apiService(), kstatus.InProgressStatus, status.ReasonAPIServiceUnavailable, "Available not reported yet by the API server"},
		{"other conditions only", apiService(cond("Ready", "True", "", "")), kstatus.InProgressStatus, status.ReasonAPIServiceUnavailable, "Available not reported yet by the API server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ks, err := kstatus.Compute(tt.u); err != nil || ks.Status != kstatus.CurrentStatus {
				t.Errorf("kstatus: %v, %v; the rule exists because kstatus calls every APIService Current", ks, err)
			}
			v, ok := Checker{}.ownRule(context.Background(), tt.u)
			if !ok || v.Status != tt.want || v.Reason != tt.wantReason || status.Plain(v.Message) != tt.wantMsg || v.Advisory {
				t.Errorf("got %v %+v, want %s %q %q", ok, v, tt.want, tt.wantReason, tt.wantMsg)
			}
		})
	}
}

// The API server's words are foreign: a value of the resource's spec that
// they quote is redacted, the operator's own words never.
func TestAPIServiceVerdictRedactsTheAPIServersWords(t *testing.T) {
	v := apiServiceVerdict(apiService(cond("Available", "False", "ServiceNotFound", `service/s3cr3t-service in "ns" is not present`)))
	got := status.NewRedactor(map[string]any{"name": "s3cr3t-service", "word": "Available"}).Safe(v.Message, MaxObjectMessageLength)
	want := "Available=False ServiceNotFound: service/" + status.RedactedMark + ` in "ns" is not present`
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAnAPIServiceOfAnotherGroupHasNoRule(t *testing.T) {
	if v, ok := (Checker{}).ownRule(context.Background(), obj("example.com/v1", "APIService", map[string]any{})); ok {
		t.Errorf("an APIService kind of another group is not the API server's: %+v", v)
	}
}
