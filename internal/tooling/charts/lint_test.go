package charts

import (
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint --strict` on each chart, with its defaults and with
// every optional feature on.
func TestLint(t *testing.T) {
	allOn := map[string]any{
		"ingress":             map[string]any{"enabled": true},
		"autoscaling":         map[string]any{"enabled": true},
		"podDisruptionBudget": map[string]any{"enabled": true},
	}
	tests := []struct {
		name   string
		dir    string
		values map[string]any
	}{
		{"nginx defaults", nginxDir, nil},
		{"nginx all features", nginxDir, allOn},
		{"echo defaults", echoDir, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = namespace
			res := lint.Run([]string{tt.dir}, tt.values)
			for _, err := range res.Errors {
				t.Errorf("lint error: %v", err)
			}
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %v", m)
				} else {
					t.Logf("lint: %v", m)
				}
			}
		})
	}
}
