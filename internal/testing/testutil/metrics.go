package testutil

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ServiceAccountToken creates the ServiceAccount name in ns and returns a
// token for it from the TokenRequest API of the cluster of cfg.
func ServiceAccountToken(t testing.TB, cfg *rest.Config, c client.Client, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// BindMetricsReader creates the metrics-reader ClusterRole read from
// rolePath (relative to the repository root: config/rbac's, or the
// bundle's) under a name of ns's, and binds it to the ServiceAccount sa of
// ns; both are deleted when the test ends.
func BindMetricsReader(t testing.TB, c client.Client, rolePath, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), rolePath))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	role.Name = ns + "-metrics-reader"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}

// Scrape GETs url with the bearer token (none when empty), as Prometheus
// does with tlsConfig.insecureSkipVerify: the certificate is self-signed. It
// returns the HTTP status code (0 when there was no answer) and the body, or
// the error.
func Scrape(url, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the endpoint's certificate is self-signed
	}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
