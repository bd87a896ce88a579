package installtest_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// scrapeAsMetricsReader scrapes the operator's metrics at addr with the token
// of a ServiceAccount of ns bound to the bundle's metrics-reader ClusterRole,
// until it gets the operator's series: the operator, running under the CSV's
// rules, could review the token (TokenReview) and its access
// (SubjectAccessReview).
func scrapeAsMetricsReader(t *testing.T, c client.Client, addr, ns string) {
	t.Helper()
	token := tu.ServiceAccountToken(t, cfg, c, ns, "scraper")
	tu.BindMetricsReader(t, c, filepath.Join("bundle", "manifests", "helm-app-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"), ns, "scraper")
	tu.Eventually(t, time.Minute, "a scrape with a metrics-reader token to get the operator's series", func() (bool, string) {
		code, body := tu.Scrape("https://"+addr+"/metrics", token)
		return code == http.StatusOK && strings.Contains(body, "\nhelmapp_reconcile_total{"),
			fmt.Sprintf("HTTP %d: %.200s", code, body)
	})
}
