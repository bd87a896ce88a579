package installtest_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// scrapeAsMetricsReader scrapes the operator's metrics at addr with the token
// of a ServiceAccount of ns bound to the bundle's metrics-reader ClusterRole,
// until it gets the operator's series: the operator, running under the CSV's
// rules, could review the token (TokenReview) and its access
// (SubjectAccessReview).
func scrapeAsMetricsReader(t *testing.T, c client.Client, addr, ns string) {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(tu.RepoRoot(), "bundle", "manifests", "helm-app-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := sigsyaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	role.Name = ns + "-metrics-reader"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	for _, o := range []client.Object{role, sa, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the endpoint's certificate is self-signed
	}}
	tu.Eventually(t, time.Minute, "a scrape with a metrics-reader token to get the operator's series", func() (bool, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "\nhelmapp_reconcile_total{"),
			fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, b)
	})
}
