package release

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
)

// Each way a chart can fail to render, with the error Helm really returns
// for it: a real install (Helm's engine, its manifest sorter and kube client,
// Secret storage) on a real kube-apiserver of a chart of testdata/charts.
// Render failures are stalled (ChartRenderError); a chart that renders but
// is rejected by the API server is not. Each case names the part of the
// error renderFailure goes by, so that a Helm upgrade changing one fails here.
func TestRenderFailuresOfRealCharts(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	tests := []struct {
		chart   string
		values  map[string]any
		stalled bool
		// inErr is what the error says, as renderFailure reads it.
		inErr string
	}{
		{chart: "exec-error", stalled: true, inErr: `error calling include: template: no template "no-such-template"`}, // a template.ExecError, typed
		{chart: "parse-error", stalled: true, inErr: "parse error at (parse-error/templates/cm.yaml:5): missing value for if"},
		{chart: "fail", stalled: true, inErr: "execution error at (fail/templates/cm.yaml:1:3): this chart refuses to render"},
		{chart: "required", stalled: true, inErr: "execution error at (required/templates/cm.yaml:4:11): page.title is required"},
		{chart: "yaml-error", stalled: true, inErr: "YAML parse error on yaml-error/templates/cm.yaml: error converting YAML to JSON"},
		{chart: "tpl-error", stalled: true, inErr: `error calling tpl: cannot parse template "{{ if }}"`}, // a template.ExecError too
		{chart: "schema", values: map[string]any{"replicas": 5}, stalled: true, inErr: "values don't meet the specifications of the schema(s) in the following chart(s):\nschema:"},
		{chart: "rejected", stalled: false, inErr: `ConfigMap "Not_A_Valid_Name" is invalid`},
	}
	for _, tt := range tests {
		t.Run(tt.chart, func(t *testing.T) {
			chrt, err := loader.Load(filepath.Join("testdata", "charts", tt.chart))
			if err != nil {
				t.Fatal(err)
			}
			flags := genericclioptions.NewConfigFlags(false)
			flags.KubeConfig = &cp.KubeconfigPath
			ns := "default"
			flags.Namespace = &ns
			cfg := &action.Configuration{}
			if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
				t.Fatal(err)
			}
			install := action.NewInstall(cfg)
			install.ReleaseName, install.Namespace = tt.chart, ns
			_, err = install.RunWithContext(ctx, chrt, tt.values)
			if err == nil {
				t.Fatal("the chart installed")
			}
			if !strings.Contains(err.Error(), tt.inErr) {
				t.Errorf("Helm's error %q does not contain %q", err, tt.inErr)
			}
			e := helmError(err, status.ReasonInstallError, status.ActionInstall, "Install")
			if got := e.StalledReason == status.ReasonChartRenderError; got != tt.stalled {
				t.Errorf("stalled (ChartRenderError) = %v, want %v, for %q", got, tt.stalled, err)
			}
		})
	}
}
